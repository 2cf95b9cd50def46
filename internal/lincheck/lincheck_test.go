package lincheck

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// TestModel: hand-made histories the model must accept or reject.
func TestModel(t *testing.T) {
	put := func(k, v string) Input { return Input{Kind: Put, Group: "g", Key: k, Value: v} }
	get := func(k string) Input { return Input{Kind: Get, Group: "g", Key: k} }
	cas := func(k, exp, v string) Input { return Input{Kind: CAS, Group: "g", Key: k, Expect: exp, Value: v} }
	ok := Output{OK: true}
	found := func(v string) Output { return Output{OK: true, Found: true, Value: v} }
	tests := []struct {
		name string
		ops  []porcupine.Operation
		want bool
	}{
		{"read your write", []porcupine.Operation{op(0, 0, 1, put("a", "1"), ok), op(0, 2, 3, get("a"), found("1"))}, true},
		{"stale read", []porcupine.Operation{op(0, 0, 1, put("a", "1"), ok), op(0, 2, 3, put("a", "2"), ok), op(1, 4, 5, get("a"), found("1"))}, false},
		{"lost CAS", []porcupine.Operation{op(0, 0, 1, put("a", "1"), ok), op(0, 2, 3, cas("a", "1", "2"), ok), op(1, 4, 5, cas("a", "1", "3"), ok)}, false},
		{"CAS conflict on a matching value", []porcupine.Operation{op(0, 0, 1, put("a", "1"), ok), op(0, 2, 3, cas("a", "1", "2"), Output{Conflict: true})}, false},
		{"unknown write may apply", []porcupine.Operation{op(0, 0, 1<<62, put("a", "1"), Output{Unknown: true}), op(1, 2, 3, get("a"), found("1"))}, true},
		{"unknown write may not apply", []porcupine.Operation{op(0, 0, 1<<62, put("a", "1"), Output{Unknown: true}), op(1, 2, 3, get("a"), Output{})}, true},
		{"no-effect write never applies", []porcupine.Operation{op(0, 0, 1, put("a", "1"), Output{NoEffect: true}), op(1, 2, 3, get("a"), found("1"))}, false},
		{"guard changed", []porcupine.Operation{
			op(0, 0, 1, put("g1", "x"), ok), op(0, 2, 3, put("g1", "y"), ok),
			op(1, 4, 5, Input{Kind: Guarded, Group: "g", GuardKey: "g1", GuardValue: "x", Key: "t", ExpectAbsent: true, Value: "v"}, ok)}, false},
	}
	for _, tc := range tests {
		if got := porcupine.CheckOperations(Model, tc.ops); got != tc.want {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCheckWritesVisualisationOnViolation(t *testing.T) {
	ops := []porcupine.Operation{
		op(0, 0, 1, Input{Kind: Put, Group: "g", Key: "a", Value: "1"}, Output{OK: true}),
		op(1, 2, 3, Input{Kind: Get, Group: "g", Key: "a"}, Output{}),
	}
	res, err := Check(ops, time.Second, t.TempDir(), "bad")
	if err != nil || res.Verdict != porcupine.Illegal || res.Visualization == "" {
		t.Fatalf("Check = %+v, %v", res, err)
	}
}
