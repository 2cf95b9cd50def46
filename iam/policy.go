package iam

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Document is an IAM policy document.
type Document struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a Document. Condition maps an operator
// (StringLike, ForAllValues:StringLike, StringEquals) to condition keys and
// their values.
type Statement struct {
	Sid       string                         `json:"Sid"`
	Effect    string                         `json:"Effect"`
	Action    []string                       `json:"Action"`
	Resource  []string                       `json:"Resource"`
	Condition map[string]map[string][]string `json:"Condition,omitempty"`
	// Why says why the statement is there; Rare, when set, says why a
	// role's ordinary workload may not use it (a command run seldom). Not
	// part of the JSON IAM reads.
	Why  string `json:"-"`
	Rare string `json:"-"`
}

// JSON renders the document as IAM reads it, indented, with a newline.
func (d Document) JSON() []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		panic(err) // a Document always encodes
	}
	return b.Bytes()
}

// Request is one authorization to decide: an action on a resource, with
// the condition keys IAM would see for it.
type Request struct {
	Action   string
	Resource string
	// LeadingKeys are the partition key values (dynamodb:LeadingKeys) of
	// an item action; empty for a table action or a Scan.
	LeadingKeys []string
	// Prefix is a ListBucket's s3:prefix, when HasPrefix.
	Prefix    string
	HasPrefix bool
}

// Decision is what Evaluate decided and which statement decided it.
type Decision struct {
	Allowed bool
	// Sid is the statement that allowed or explicitly denied the request
	// ("" for the implicit deny).
	Sid string
}

// Evaluate decides a request as IAM's policy logic does for one identity
// policy: an explicit Deny wins, then any Allow, else the implicit deny.
// Actions and resources match with IAM's wildcards (* and ?), actions
// case-insensitively. Conditions supported: StringLike and StringEquals
// (all listed keys must be present and match one of their values), and
// ForAllValues:StringLike (every value of the key must match one pattern;
// like IAM, an absent or empty key satisfies it, which is why a policy
// conditioned on dynamodb:LeadingKeys MUST NOT allow Scan). An unknown
// operator never matches.
func (d Document) Evaluate(r Request) Decision {
	allow := Decision{}
	for _, s := range d.Statement {
		if !s.matches(r) {
			continue
		}
		if s.Effect == "Deny" {
			return Decision{Allowed: false, Sid: s.Sid}
		}
		if !allow.Allowed {
			allow = Decision{Allowed: true, Sid: s.Sid}
		}
	}
	return allow
}

func (s Statement) matches(r Request) bool {
	if !slices.ContainsFunc(s.Action, func(a string) bool { return glob(strings.ToLower(a), strings.ToLower(r.Action)) }) {
		return false
	}
	if !slices.ContainsFunc(s.Resource, func(p string) bool { return glob(p, r.Resource) }) {
		return false
	}
	for op, keys := range s.Condition {
		for key, patterns := range keys {
			if !condition(op, key, patterns, r) {
				return false
			}
		}
	}
	return true
}

func condition(op, key string, patterns []string, r Request) bool {
	var values []string
	present := false
	switch key {
	case "dynamodb:LeadingKeys":
		values, present = r.LeadingKeys, len(r.LeadingKeys) > 0
	case "s3:prefix":
		values, present = []string{r.Prefix}, r.HasPrefix
	default:
		return false
	}
	one := func(v string, like bool) bool {
		return slices.ContainsFunc(patterns, func(p string) bool {
			if like {
				return glob(p, v)
			}
			return p == v
		})
	}
	switch op {
	case "ForAllValues:StringLike":
		for _, v := range values {
			if !one(v, true) {
				return false
			}
		}
		return true
	case "StringLike", "StringEquals":
		if !present {
			return false
		}
		for _, v := range values {
			if !one(v, op == "StringLike") {
				return false
			}
		}
		return true
	}
	return false
}

// glob matches IAM's wildcards: * any run of characters (slashes too), ?
// one character.
func glob(pattern, s string) bool {
	if !strings.ContainsAny(pattern, "*?") {
		return pattern == s
	}
	// path.Match's * stops at '/'; IAM's does not.
	return globAt(pattern, s)
}

func globAt(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			if p == "" {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globAt(p, s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			p, s = p[1:], s[1:]
		default:
			if s == "" || p[0] != s[0] {
				return false
			}
			p, s = p[1:], s[1:]
		}
	}
	return s == ""
}
