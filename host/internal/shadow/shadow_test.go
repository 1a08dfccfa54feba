package shadow

import (
	"strings"
	"testing"
)

// Verdict refuses a run that stopped, compared nothing, or whose ratio
// did not stay under its limit (equal is refused; 0 refuses any), and
// passes the rest.
func TestVerdict(t *testing.T) {
	run := func(records, diff, fail int64) Status {
		return Status{Running: true, Total: Counts{Records: records, Matches: records - diff - fail, Differences: diff, Failures: fail}}
	}
	for _, c := range []struct {
		st             Status
		maxFail, maxDf float64
		want           string // "" passes
	}{
		{run(1000, 0, 0), 0.01, -1, ""},
		{run(1000, 0, 9), 0.01, -1, ""},
		{run(1000, 0, 10), 0.01, -1, "failed 10 of 1000 records (1.00%; swap.max_failure_ratio 1.00%)"},
		{run(1000, 0, 1), 0, -1, "failed 1 of 1000"},
		{run(1000, 999, 0), 0.01, -1, ""},
		{run(1000, 100, 0), 0.01, 0.1, "differed from the active version's for 100 of 1000 records"},
		{run(1000, 99, 0), 0.01, 0.1, ""},
		{run(0, 0, 0), 0.01, -1, "compared no record"},
		{Status{Stopped: "fell behind in task t"}, 0.01, -1, "its shadow run stopped: fell behind in task t"},
	} {
		got := Verdict(c.st, c.maxFail, c.maxDf)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("Verdict(%+v, %v, %v) = %q, want %q", c.st.Total, c.maxFail, c.maxDf, got, c.want)
		}
	}
	if c := (Counts{Records: 8, Matches: 6, Differences: 1, Failures: 1}); c.MatchRate() != 0.75 || c.DiffRatio() != 0.125 || c.FailureRatio() != 0.125 {
		t.Errorf("ratios of %+v: %v %v %v", c, c.MatchRate(), c.DiffRatio(), c.FailureRatio())
	}
	if (Counts{}).MatchRate() != 1 {
		t.Error("the match rate of no record is not 1")
	}
}
