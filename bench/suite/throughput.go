package main

// SchedulingThroughput as scheduler_perf computes it (util.go, throughputCollector): every second, the pods newly
// seen bound in the measured namespaces divided by the time since the last sample; the first tick that sees any
// bound pod only starts the clock; a tick that sees none new is skipped and the next sample is repeated for it.

import (
	"math"
	"sort"
	"time"
)

// Throughput is the summary of one measurement, in pods per second.
type Throughput struct {
	Samples int     `json:"samples"`
	Average float64 `json:"average"`
	Perc50  float64 `json:"perc50"`
	Perc90  float64 `json:"perc90"`
	Perc95  float64 `json:"perc95"`
	Perc99  float64 `json:"perc99"`
}

// sampler turns the running count of scheduled pods, read once per tick, into throughput samples.
type sampler struct {
	started  bool
	last     int
	lastTime time.Time
	skipped  int
	samples  []float64
}

// tick takes the count of scheduled pods at now.
func (s *sampler) tick(now time.Time, scheduled int) {
	if scheduled == 0 {
		return
	}
	if !s.started {
		s.started, s.last, s.lastTime = true, scheduled, now
		return
	}
	n := scheduled - s.last
	if n == 0 {
		s.skipped++
		return
	}
	rate := float64(n) / now.Sub(s.lastTime).Seconds()
	for i := 0; i <= s.skipped; i++ {
		s.samples = append(s.samples, rate)
	}
	s.last, s.lastTime, s.skipped = scheduled, now, 0
}

// summarize computes the average and upstream's percentiles: the value at index ceil(n*p/100)-1 of the sorted
// samples.
func summarize(samples []float64) Throughput {
	t := Throughput{Samples: len(samples)}
	if len(samples) == 0 {
		return t
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	at := func(p int) float64 { return s[int(math.Ceil(float64(len(s)*p)/100))-1] }
	t.Average, t.Perc50, t.Perc90, t.Perc95, t.Perc99 = sum/float64(len(s)), at(50), at(90), at(95), at(99)
	return t
}
