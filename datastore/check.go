package datastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lakemeta/lake/metastore"
)

// Checker is the optional ability of a driver to check its own structures
// (lake data check): it reads one namespace's logs or feed, heads,
// registry, path index, pending marks and the chunks of its live files,
// and reports every inconsistency with the objects or items involved.
// With Repair it rebuilds what can be derived (an index entry or a head
// from the log, a commit not rolled forward) and moves aside what cannot
// (garbage that lake never writes), naming where, so that nothing is lost
// and nothing is retried over again. Repair runs under the namespace's
// lock; its writes are conditional, like every write of the driver.
type Checker interface {
	Check(ctx context.Context, o CheckOptions) (CheckReport, error)
}

// CheckOptions shape Check.
type CheckOptions struct {
	// Repair fixes what can be fixed; without it Check only reads.
	Repair bool
	// Fence is the namespace lock's fence, held while repairing.
	Fence *Fence
	// Chunks also checks that every chunk of every live file exists (one
	// listing per live version).
	Chunks bool
	// Now is the time of the repair's writes (zero: time.Now()).
	Now time.Time
}

// Problem is one inconsistency found by Check.
type Problem struct {
	// Object is the backend's name of the object or item involved.
	Object string `json:"object"`
	// What says what is wrong.
	What string `json:"what"`
	// Fix says what Repair does about it ("" if nothing can be done), or,
	// once repaired, what it did.
	Fix string `json:"fix,omitempty"`
	// Repaired is set once Repair has fixed it.
	Repaired bool `json:"repaired,omitempty"`
}

// String is the problem as lake data check prints it: OBJECT: WHAT, then
// what --repair does or did.
func (p Problem) String() string {
	s := p.Object + ": " + p.What
	switch {
	case p.Repaired:
		s += " (repaired: " + p.Fix + ")"
	case p.Fix != "":
		s += " (--repair: " + p.Fix + ")"
	default:
		s += " (not repairable)"
	}
	return s
}

// CheckReport is what Check found.
type CheckReport struct {
	// Objects is how many objects or items were read.
	Objects int `json:"objects"`
	// Partitions is how many partitions were checked.
	Partitions int `json:"partitions"`
	// Problems lists every inconsistency, repaired or not.
	Problems []Problem `json:"problems"`
}

// Unrepaired counts the problems not repaired.
func (r CheckReport) Unrepaired() int {
	n := 0
	for _, p := range r.Problems {
		if !p.Repaired {
			n++
		}
	}
	return n
}

// Check runs the driver's Checker over s's namespace, or refuses
// (metastore.ErrRefused) if the driver has none; then, unless the driver
// does it itself (RegistryChecker), it checks the namespace's registry
// record (checkRegistryRecord).
func (s *Store) Check(ctx context.Context, o CheckOptions) (CheckReport, error) {
	if err := s.open(); err != nil {
		return CheckReport{}, err
	}
	c, ok := s.d.(Checker)
	if !ok {
		return CheckReport{}, fmt.Errorf("%w: the %s datastore driver has no check", metastore.ErrRefused, s.d.Name())
	}
	if o.Now.IsZero() {
		o.Now = s.now()
	}
	rep, err := c.Check(ctx, o)
	if err != nil {
		return rep, err
	}
	if rc, ok := s.d.(RegistryChecker); !ok || !rc.ChecksRegistryRecord() {
		err = s.checkRegistryRecord(ctx, o, &rep)
	}
	return rep, err
}

// RegistryChecker is the optional ability of a Checker that checks its
// namespace's registry record itself (S3's, an object beside the heads;
// a node's, whose own Store checks it): Store.Check does not check it
// again.
type RegistryChecker interface {
	ChecksRegistryRecord() bool
}

// QuarantineRecords is the prefix under which Store.Check's repair moves
// a registry record aside (Records keys QuarantineRecords+TIME/+KEY).
const QuarantineRecords = "datastore/quarantine/"

// checkRegistryRecord names the namespace's registry record when it is not
// one: every sync's lifecycle of the namespace fails on it, each time,
// until it is repaired. A repair moves it aside (a create of its bytes
// under QuarantineRecords, then a delete of the record conditional on
// them), after which the namespace has no policy until one is set again,
// and its next commit registers it again.
func (s *Store) checkRegistryRecord(ctx context.Context, o CheckOptions, rep *CheckReport) error {
	key := nsRegistryPrefix + s.NamespaceName()
	recs := s.root.Records()
	raw, err := recs.GetRecord(ctx, key)
	if errors.Is(err, metastore.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	rep.Objects++
	var c NamespaceConfig
	if json.Unmarshal(raw, &c) == nil {
		return nil
	}
	aside := QuarantineRecords + o.Now.UTC().Format("20060102T150405.000000000Z") + "/" + key
	p := Problem{Object: "record " + key, What: "the namespace's registry record is not one (its lifecycle policy cannot be read; set it again after the repair)", Fix: "move it aside to record " + aside}
	if o.Repair {
		if err := recs.CASRecord(ctx, aside, metastore.ExpectAbsent(), raw); err != nil && !errors.Is(err, metastore.ErrConflict) {
			return err
		}
		if err := recs.DeleteRecord(ctx, key, raw); err != nil {
			return err
		}
		p.Repaired = true
	}
	rep.Problems = append(rep.Problems, p)
	return nil
}
