// Package shadow is what a shadow run reports (the runner's
// host/internal/runner/shadow.go runs it): its counts of matching,
// differing and failed records, samples of the records the two versions
// did not agree on, its status, and the verdict shadow-first draws from
// them. A leaf: the runner fills these in, the deployer reads them from
// the diff topic.
package shadow

import (
	"fmt"
	"time"
)

// Counts are a shadow run's records: each record both versions ran
// counts once, as a match (the same emits), a difference, or a failure of
// the candidate (whatever the active version did with it).
type Counts struct {
	Records     int64 `json:"records"`
	Matches     int64 `json:"matches"`
	Differences int64 `json:"differences"`
	Failures    int64 `json:"failures"`
}

// Add returns c plus o.
func (c Counts) Add(o Counts) Counts {
	return Counts{c.Records + o.Records, c.Matches + o.Matches, c.Differences + o.Differences, c.Failures + o.Failures}
}

// MatchRate is Matches over Records (1 with no record).
func (c Counts) MatchRate() float64 { return ratio(c.Matches, c.Records, 1) }

// DiffRatio is Differences over Records.
func (c Counts) DiffRatio() float64 { return ratio(c.Differences, c.Records, 0) }

// FailureRatio is Failures over Records.
func (c Counts) FailureRatio() float64 { return ratio(c.Failures, c.Records, 0) }

func ratio(a, b int64, none float64) float64 {
	if b == 0 {
		return none
	}
	return float64(a) / float64(b)
}

// Emit is one emit of a sample: Key and Value cut to the sample
// size (KeyLen and ValueLen are the full lengths).
type Emit struct {
	Output   string            `json:"output"`
	Key      []byte            `json:"key"`
	Value    []byte            `json:"value"`
	KeyLen   int               `json:"key_len"`
	ValueLen int               `json:"value_len"`
	Headers  map[string][]byte `json:"headers,omitempty"`
}

// Sample is a record the two versions did not agree on: its input,
// and what each version emitted (Emits is cut to a few; Count is how many)
// or its failure.
type Sample struct {
	Task      string `json:"task"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key"`
	Active    Side   `json:"active"`
	Candidate Side   `json:"candidate"`
	Seq       int64  `json:"seq"`
}

// Side is one version's result for a sample's record.
type Side struct {
	Emits []Emit `json:"emits,omitempty"`
	Count int    `json:"count"`
	Error string `json:"error,omitempty"`
}

// Status is a processor's shadow in this process.
type Status struct {
	Processor string            `json:"processor"`
	Version   string            `json:"version"`
	Started   time.Time         `json:"started"`
	Running   bool              `json:"running"`
	Stopped   string            `json:"stopped,omitempty"` // why it stopped; "" while it runs
	Total     Counts            `json:"total"`
	Tasks     map[string]Counts `json:"tasks"`
	Samples   int               `json:"samples"` // samples taken so far
}

// Verdict judges a shadow run for shadow-first (`deploy
// --shadow-first`): "" if the candidate may go live, else why not. It is
// refused if it stopped itself, compared no record, or if its failure
// ratio (or, when maxDiffRatio >= 0, its difference ratio) did not stay
// under the limit: a ratio equal to its limit is refused, and a limit of 0
// refuses any failure.
func Verdict(st Status, maxFailureRatio, maxDiffRatio float64) string {
	c := st.Total
	switch {
	case !st.Running && st.Stopped != "":
		return "its shadow run stopped: " + st.Stopped
	case c.Records == 0:
		return "its shadow run compared no record (no input came while it ran)"
	case c.Failures > 0 && c.FailureRatio() >= maxFailureRatio:
		return fmt.Sprintf("its shadow run failed %d of %d records (%.2f%%; swap.max_failure_ratio %.2f%%)",
			c.Failures, c.Records, 100*c.FailureRatio(), 100*maxFailureRatio)
	case maxDiffRatio >= 0 && c.Differences > 0 && c.DiffRatio() >= maxDiffRatio:
		return fmt.Sprintf("its output differed from the active version's for %d of %d records (%.2f%%; --max-diff-ratio %.2f%%)",
			c.Differences, c.Records, 100*c.DiffRatio(), 100*maxDiffRatio)
	}
	return ""
}
