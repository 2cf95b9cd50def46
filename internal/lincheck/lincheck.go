// Package lincheck checks histories of the metastore contract for
// linearizability with porcupine: a sequential model of every operation
// (get, put, CAS, create-if-absent, delete-if-equals, guarded mutate),
// partitioned by key group, so that a guard and the targets it guards are
// checked together and every other group on its own.
//
// An operation whose outcome the client could not know (a timeout, a reset
// after sending, an "outcome unknown" error) is recorded with Unknown set
// and returns at the end of time; the model then accepts both outcomes for
// it, as porcupine's author recommends: it may take effect at any point
// after its call, or never.
package lincheck

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation of the contract.
type Kind string

// The operations.
const (
	Get     Kind = "get"
	Put     Kind = "put"
	CAS     Kind = "cas"
	Delete  Kind = "delete"
	Guarded Kind = "guarded"
)

// Input is an operation as called. Keys belong to Group; a guarded
// mutation's guard is in the same group as its target.
type Input struct {
	Kind         Kind   `json:"kind"`
	Group        string `json:"group"`
	Key          string `json:"key"`
	Value        string `json:"value,omitempty"` // put, cas, guarded (unless Delete)
	ExpectAbsent bool   `json:"expect_absent,omitempty"`
	Expect       string `json:"expect,omitempty"`
	Delete       bool   `json:"delete,omitempty"` // guarded: delete the target
	GuardKey     string `json:"guard_key,omitempty"`
	GuardValue   string `json:"guard_value,omitempty"`
}

// Output is an operation's outcome as the client saw it.
type Output struct {
	// Unknown: the client cannot know whether the operation applied.
	Unknown bool `json:"unknown,omitempty"`
	// NoEffect: the operation definitely did not apply (writes paused, a
	// refusal): any state is fine and nothing changes.
	NoEffect bool `json:"no_effect,omitempty"`
	// OK: the operation applied (a write), or the read found a value.
	OK bool `json:"ok,omitempty"`
	// Conflict: a condition did not hold; nothing changed.
	Conflict bool `json:"conflict,omitempty"`
	// Found and Value are a get's result.
	Found bool   `json:"found,omitempty"`
	Value string `json:"value,omitempty"`
}

// state is one group's keys and values, immutable.
type state map[string]string

// holds reports whether key is absent (expectAbsent) or holds value.
func (s state) holds(key string, absent bool, value string) bool {
	v, ok := s[key]
	if absent {
		return !ok
	}
	return ok && v == value
}

// Model is the sequential specification of the contract.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byGroup := map[string][]porcupine.Operation{}
		for _, op := range history {
			g := op.Input.(Input).Group
			byGroup[g] = append(byGroup[g], op)
		}
		var out [][]porcupine.Operation
		for _, g := range slices.Sorted(maps.Keys(byGroup)) {
			out = append(out, byGroup[g])
		}
		return out
	},
	Init: func() any { return state{} },
	Step: func(st, in, out any) (bool, any) {
		s, i, o := st.(state), in.(Input), out.(Output)
		if o.NoEffect {
			return true, s
		}
		var cond bool
		next := s
		switch i.Kind {
		case Get:
			if o.Unknown {
				return true, s
			}
			v, ok := s[i.Key]
			return ok == o.Found && (!ok || v == o.Value), s
		case Put:
			cond = true
			next = with(s, i.Key, i.Value, false)
		case CAS:
			cond = s.holds(i.Key, i.ExpectAbsent, i.Expect)
			next = with(s, i.Key, i.Value, false)
		case Delete:
			cond = s.holds(i.Key, false, i.Expect)
			next = with(s, i.Key, "", true)
		case Guarded:
			cond = s.holds(i.GuardKey, false, i.GuardValue) && s.holds(i.Key, i.ExpectAbsent, i.Expect)
			next = with(s, i.Key, i.Value, i.Delete)
		}
		switch {
		case o.Unknown:
			// Either it applied here (and then only if its condition
			// held), or it is linearized at the end of time.
			if cond {
				return true, next
			}
			return true, s
		case o.OK:
			return cond, next
		case o.Conflict:
			return !cond, s
		}
		return false, s
	},
	Equal: func(a, b any) bool { return maps.Equal(a.(state), b.(state)) },
	DescribeOperation: func(in, out any) string {
		i, o := in.(Input), out.(Output)
		var res string
		switch {
		case o.Unknown:
			res = "unknown"
		case o.NoEffect:
			res = "no effect"
		case o.Conflict:
			res = "conflict"
		case i.Kind == Get && !o.Found:
			res = "not found"
		case i.Kind == Get:
			res = fmt.Sprintf("%q", o.Value)
		default:
			res = "ok"
		}
		switch i.Kind {
		case Get:
			return fmt.Sprintf("get(%s) → %s", i.Key, res)
		case Put:
			return fmt.Sprintf("put(%s, %q) → %s", i.Key, i.Value, res)
		case CAS:
			exp := fmt.Sprintf("%q", i.Expect)
			if i.ExpectAbsent {
				exp = "absent"
			}
			return fmt.Sprintf("cas(%s, %s → %q) → %s", i.Key, exp, i.Value, res)
		case Delete:
			return fmt.Sprintf("delete(%s, %q) → %s", i.Key, i.Expect, res)
		default:
			return fmt.Sprintf("guarded(%s=%q; %s → %q del=%v) → %s", i.GuardKey, i.GuardValue, i.Key, i.Value, i.Delete, res)
		}
	},
	DescribeState: func(st any) string {
		s := st.(state)
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(s)) {
			parts = append(parts, fmt.Sprintf("%s=%q", k, s[k]))
		}
		return "{" + strings.Join(parts, " ") + "}"
	},
}

func with(s state, key, value string, del bool) state {
	n := maps.Clone(s)
	if del {
		delete(n, key)
	} else {
		n[key] = value
	}
	return n
}

// Recorder collects a history from concurrent clients.
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

// NewRecorder starts a history.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Call returns the call timestamp of an operation.
func (r *Recorder) Call() int64 { return int64(time.Since(r.start)) }

// Done records an operation of client that was called at call. An
// operation with an unknown outcome returns at the end of time.
func (r *Recorder) Done(client int, call int64, in Input, out Output) {
	ret := int64(time.Since(r.start))
	if out.Unknown {
		ret = math.MaxInt64
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

// Operations returns the history so far.
func (r *Recorder) Operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// Result is the verdict on a history.
type Result struct {
	Verdict    porcupine.CheckResult
	Operations int
	Unknown    int
	// Visualization and History are the files written for a history that
	// is not linearizable (or could not be checked in time).
	Visualization, History string
}

// Check checks ops; if they are not linearizable (or the check times out),
// it writes the history as JSON and porcupine's HTML visualisation into dir.
func Check(ops []porcupine.Operation, timeout time.Duration, dir, name string) (Result, error) {
	res := Result{Operations: len(ops)}
	for _, op := range ops {
		if op.Output.(Output).Unknown {
			res.Unknown++
		}
	}
	verdict, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	res.Verdict = verdict
	if verdict == porcupine.Ok {
		return res, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return res, err
	}
	res.Visualization = dir + "/" + name + ".html"
	res.History = dir + "/" + name + ".json"
	if err := porcupine.VisualizePath(Model, info, res.Visualization); err != nil {
		return res, err
	}
	b, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return res, err
	}
	return res, os.WriteFile(res.History, b, 0o644)
}
