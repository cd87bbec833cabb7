package kws

import "fmt"

// Level is a log severity.
type Level uint8

// The log levels, in the contract's order.
const (
	// LevelDebug is debugging detail.
	LevelDebug Level = iota
	// LevelInfo is normal operation.
	LevelInfo
	// LevelWarn is something unexpected but handled.
	LevelWarn
	// LevelError is a failure.
	LevelError
)

// Log writes to the scheduler's log, tagged with the plugin's name (rate-limited by the host).
func Log(level Level, message string) { hostLog(level, message) }

// Logf is Log with a format.
func Logf(level Level, format string, args ...any) { hostLog(level, fmt.Sprintf(format, args...)) }

// Random is 64 random bits from the scheduler's generator (seeded in the simulator, so runs repeat).
func Random() uint64 { return hostRandom() }

// NowNs is wall-clock time, nanoseconds since the Unix epoch, from the host (the guest's own clock is WASI's).
func NowNs() uint64 { return hostNowNs() }

// CycleStateWrite stores bytes under a key for the rest of this pod's scheduling cycle; keys are private to
// the plugin.
func CycleStateWrite(key string, value []byte) { hostCycleStateWrite(key, value) }

// CycleStateRead reads bytes stored earlier in this pod's scheduling cycle.
func CycleStateRead(key string) ([]byte, bool) { return hostCycleStateRead(key) }
