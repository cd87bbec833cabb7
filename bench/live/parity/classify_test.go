package main

import "testing"

func runs(nodes ...string) []outcome {
	var out []outcome
	for _, n := range nodes {
		out = append(out, outcome{node: n})
	}
	return out
}

// TestClassify pins how two series of placements of one probe are judged.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b []outcome
		want string
	}{
		{"both steady, same node", runs("n1", "n1"), runs("n1", "n1"), alike},
		{"both unschedulable", runs("", ""), runs("", ""), alike},
		{"both steady, apart", runs("n1", "n1"), runs("n2", "n2"), divergent},
		{"both vary: a tie", runs("n1", "n2"), runs("n2", "n2", "n1"), tie},
		{"a tie on one side only", runs("n1", "n2", "n1", "n2", "n2"), runs("n1", "n1", "n1", "n1"), divergent},
		{"two stray runs", runs("n1", "n7", "n7", "n1", "n1", "n1"), runs("n1", "n1", "n1", "n1"), stray},
		{"one stray run", runs("n1", "n7", "n1", "n1"), runs("n1", "n1", "n1", "n1"), stray},
		{"one stray run, the rest elsewhere", runs("n2", "n7", "n2", "n2"), runs("n1", "n1", "n1", "n1"), divergent},
	} {
		if got, _, _ := classify(c.a, c.b, "a", "b"); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
		if got, _, _ := classify(c.b, c.a, "b", "a"); got != c.want {
			t.Errorf("%s (swapped): got %s, want %s", c.name, got, c.want)
		}
	}
}
