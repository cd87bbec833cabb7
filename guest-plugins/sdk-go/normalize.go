package kws

import (
	"math"
	"math/bits"
)

// MaxNodeScore is the highest normalized score (kube-scheduler's MaxNodeScore).
const MaxNodeScore int64 = 100

// ScaleToMax scales scores by the maximum so the highest becomes maxScore: s * maxScore / max. Negative scores
// count as 0; when no score is above 0, all become 0. The same arithmetic as the Rust SDK's
// normalize::scale_to_max, overflow included (a 128-bit product for scores too large for 64 bits).
func ScaleToMax(scores []int64, maxScore int64) {
	var max int64
	for _, s := range scores {
		if s > max {
			max = s
		}
	}
	var safe int64
	if maxScore > 0 {
		safe = math.MaxInt64 / maxScore
	}
	for i, s := range scores {
		v := s
		if v < 0 {
			v = 0
		}
		switch {
		case max <= 0:
			scores[i] = 0
		case v <= safe:
			scores[i] = v * maxScore / max
		default:
			// v <= max, so the high word is below max and Div64 cannot overflow.
			hi, lo := bits.Mul64(uint64(v), uint64(maxScore))
			q, _ := bits.Div64(hi, lo, uint64(max))
			scores[i] = int64(q)
		}
	}
}

// Reverse maps scores in [0, maxScore] to maxScore - s, for "lower is better" policies.
func Reverse(scores []int64, maxScore int64) {
	for i, s := range scores {
		scores[i] = maxScore - s
	}
}
