package testdriver

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Cases are the test cases of one file, for `wasmstream test` (the format
// is in docs/testing.md). Each case runs on a pipeline of its own, from
// empty topics and stores.
type Cases struct {
	// Start is where the wall clock starts and what record timestamps
	// given as durations count from. Default DefaultStart.
	Start time.Time `yaml:"start"`
	Cases []Case    `yaml:"cases"`
}

// Case is one test case: steps run in order.
type Case struct {
	Name  string `yaml:"name"`
	Steps []Step `yaml:"steps"`
}

// Step is one step of a case: exactly one of its fields is set.
type Step struct {
	// Pipe writes records to a topic and waits until they are processed.
	Pipe *PipeStep `yaml:"pipe"`
	// Advance moves the wall clock forward (a Go duration: 30s, 1m30s).
	Advance time.Duration `yaml:"advance"`
	// Commit runs commit points until the pipeline settles (Driver.Commit);
	// written `- commit`.
	Commit bool `yaml:"commit"`
	// Expect compares what was committed with what it lists.
	Expect *Expect `yaml:"expect"`
}

// PipeStep is a pipe step.
type PipeStep struct {
	Topic   string       `yaml:"topic"`
	Records []CaseRecord `yaml:"records"`
}

// CaseRecord is a record of a case. Key and value are text, or bytes in
// hex (KeyHex, ValueHex); null is a null key or value. Timestamp is a
// duration since the case's start (90s), an RFC 3339 time, or ms since
// the epoch; piping, empty means the wall clock. Expected, a field left
// out is not compared, and Headers must be among the record's (the
// wasmstream-version header aside, which carries a build's hash).
type CaseRecord struct {
	Key       *string           `yaml:"key"`
	KeyHex    *string           `yaml:"key_hex"`
	Value     *string           `yaml:"value"`
	ValueHex  *string           `yaml:"value_hex"`
	Headers   map[string]string `yaml:"headers"`
	Timestamp string            `yaml:"timestamp"`

	// nullKey and nullValue are set for an explicit null.
	nullKey, nullValue bool
}

// Expect is what an expect step compares: the records committed to each
// output topic since the last expect that named the topic, the dead
// letters of each processor likewise, and the whole committed contents
// of each store (processor -> store -> entries, in key order).
type Expect struct {
	Outputs     map[string][]CaseRecord            `yaml:"outputs"`
	DeadLetters map[string][]CaseRecord            `yaml:"dead_letters"`
	Stores      map[string]map[string][]CaseRecord `yaml:"stores"`
}

// UnmarshalYAML takes `- commit` as a commit step, and a mapping of one
// field otherwise.
func (s *Step) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value != "commit" {
			return fmt.Errorf("line %d: step %q: a step is `commit`, or one of pipe, advance, commit, expect", n.Line, n.Value)
		}
		s.Commit = true
		return nil
	}
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return fmt.Errorf("line %d: a step has exactly one of pipe, advance, commit, expect", n.Line)
	}
	type plain Step
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	if n.Content[0].Value == "commit" && !p.Commit {
		return fmt.Errorf("line %d: `commit: false` is no step; leave it out", n.Line)
	}
	*s = Step(p)
	return nil
}

// UnmarshalYAML notes an explicit null key or value.
func (r *CaseRecord) UnmarshalYAML(n *yaml.Node) error {
	type plain CaseRecord
	var p plain
	if err := decodeStrict(n, &p); err != nil {
		return err
	}
	*r = CaseRecord(p)
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			null := n.Content[i+1].Tag == "!!null"
			switch n.Content[i].Value {
			case "key":
				r.nullKey = null
			case "value":
				r.nullValue = null
			}
		}
	}
	if (r.Key != nil || r.nullKey) && r.KeyHex != nil {
		return fmt.Errorf("line %d: a record has key or key_hex, not both", n.Line)
	}
	if (r.Value != nil || r.nullValue) && r.ValueHex != nil {
		return fmt.Errorf("line %d: a record has value or value_hex, not both", n.Line)
	}
	return nil
}

// decodeStrict decodes n into v, refusing unknown fields.
func decodeStrict(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}

// LoadCases reads a cases file.
func LoadCases(path string) (*Cases, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var cs Cases
	if err := dec.Decode(&cs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(cs.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases (a list under `cases:`)", path)
	}
	for i, c := range cs.Cases {
		if c.Name == "" {
			return nil, fmt.Errorf("%s: cases[%d] has no name", path, i)
		}
		for j, s := range c.Steps {
			set := 0
			for _, on := range []bool{s.Pipe != nil, s.Advance != 0, s.Commit, s.Expect != nil} {
				if on {
					set++
				}
			}
			if set != 1 {
				return nil, fmt.Errorf("%s: case %q, steps[%d]: a step has exactly one of pipe, advance, commit, expect", path, c.Name, j)
			}
			if s.Advance < 0 {
				return nil, fmt.Errorf("%s: case %q, steps[%d]: advance %s: wall time does not go back", path, c.Name, j, s.Advance)
			}
		}
	}
	if cs.Start.IsZero() {
		cs.Start = DefaultStart
	}
	return &cs, nil
}

// RunCases runs every case on a new pipeline of the config at path,
// writes what each did to w (PASS, or FAIL with a diff of what differed),
// and returns how many failed. An error is a case that could not run
// (a bad record, a pipeline that did not start or stopped).
func RunCases(ctx context.Context, path string, cs *Cases, opts Options, w io.Writer) (failed int) {
	opts.Start = cs.Start
	for _, c := range cs.Cases {
		diffs, err := runCase(ctx, path, cs.Start, c, opts)
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(w, "FAIL %s\n    %s\n", c.Name, strings.ReplaceAll(err.Error(), "\n", "\n    "))
		case len(diffs) > 0:
			failed++
			fmt.Fprintf(w, "FAIL %s\n", c.Name)
			for _, d := range diffs {
				fmt.Fprintf(w, "    %s\n", strings.ReplaceAll(d, "\n", "\n    "))
			}
		default:
			fmt.Fprintf(w, "ok   %s\n", c.Name)
		}
	}
	return failed
}

// runCase runs one case and returns a diff for each expectation it missed.
func runCase(ctx context.Context, path string, start time.Time, c Case, opts Options) (diffs []string, err error) {
	d, err := Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for i, s := range c.Steps {
		where := fmt.Sprintf("steps[%d]", i)
		switch {
		case s.Pipe != nil:
			recs := make([]Record, len(s.Pipe.Records))
			for j, cr := range s.Pipe.Records {
				if recs[j], err = cr.record(start); err != nil {
					return nil, fmt.Errorf("%s (pipe %s), records[%d]: %w", where, s.Pipe.Topic, j, err)
				}
			}
			err = d.Pipe(s.Pipe.Topic, recs...)
		case s.Advance > 0:
			err = d.AdvanceWallTime(s.Advance)
		case s.Commit:
			err = d.Commit()
		case s.Expect != nil:
			var ds []string
			ds, err = expect(d, start, s.Expect)
			for _, diff := range ds {
				diffs = append(diffs, where+" (expect): "+diff)
			}
		}
		if err != nil {
			return diffs, fmt.Errorf("%s: %w", where, err)
		}
	}
	return diffs, nil
}

// expect compares what an expect step lists with the pipeline's.
func expect(d *Driver, start time.Time, e *Expect) ([]string, error) {
	var diffs []string
	for _, topic := range sortedKeys(e.Outputs) {
		got, err := d.Output(topic)
		if err != nil {
			return diffs, err
		}
		if diff, err := compare(start, e.Outputs[topic], got); err != nil {
			return diffs, fmt.Errorf("outputs %s: %w", topic, err)
		} else if diff != "" {
			diffs = append(diffs, "output "+topic+" (- want, + got):\n"+diff)
		}
	}
	for _, proc := range sortedKeys(e.DeadLetters) {
		got, err := d.DeadLetters(proc)
		if err != nil {
			return diffs, err
		}
		if diff, err := compare(start, e.DeadLetters[proc], got); err != nil {
			return diffs, fmt.Errorf("dead_letters %s: %w", proc, err)
		} else if diff != "" {
			diffs = append(diffs, "dead letters of "+proc+" (- want, + got):\n"+diff)
		}
	}
	for _, proc := range sortedKeys(e.Stores) {
		for _, store := range sortedKeys(e.Stores[proc]) {
			entries, err := d.Store(proc, store)
			if err != nil {
				return diffs, err
			}
			got := make([]Record, len(entries))
			for i, en := range entries {
				got[i] = Record{Key: en.Key, Value: en.Value, Partition: en.Partition}
			}
			if diff, err := compare(start, e.Stores[proc][store], got); err != nil {
				return diffs, fmt.Errorf("stores %s %s: %w", proc, store, err)
			} else if diff != "" {
				diffs = append(diffs, "store "+store+" of "+proc+" (- want, + got):\n"+diff)
			}
		}
	}
	return diffs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// want is an expected record, decoded.
type want struct {
	key, value       []byte
	hasKey, hasValue bool
	headers          map[string]string
	ts               time.Time
	hasTS            bool
}

func (cr CaseRecord) want(start time.Time) (want, error) {
	var w want
	var err error
	if w.key, w.hasKey, err = cr.bytes("key", cr.Key, cr.KeyHex, cr.nullKey); err != nil {
		return w, err
	}
	if w.value, w.hasValue, err = cr.bytes("value", cr.Value, cr.ValueHex, cr.nullValue); err != nil {
		return w, err
	}
	w.headers = cr.Headers
	if cr.Timestamp != "" {
		if w.ts, err = parseTime(cr.Timestamp, start); err != nil {
			return w, err
		}
		w.hasTS = true
	}
	return w, nil
}

// record is the record a pipe step writes.
func (cr CaseRecord) record(start time.Time) (Record, error) {
	w, err := cr.want(start)
	if err != nil {
		return Record{}, err
	}
	r := Record{Key: w.key, Value: w.value, Timestamp: w.ts}
	for _, k := range sortedKeys(cr.Headers) {
		r.Headers = append(r.Headers, Header{Key: k, Value: []byte(cr.Headers[k])})
	}
	return r, nil
}

// bytes decodes a key or a value: text, hex, or null (set, nil).
func (cr CaseRecord) bytes(field string, text, hexText *string, null bool) ([]byte, bool, error) {
	switch {
	case null:
		return nil, true, nil
	case text != nil:
		return []byte(*text), true, nil
	case hexText != nil:
		b, err := hex.DecodeString(strings.ReplaceAll(*hexText, " ", ""))
		if err != nil {
			return nil, false, fmt.Errorf("%s_hex %q: %w", field, *hexText, err)
		}
		return b, true, nil
	}
	return nil, false, nil
}

// parseTime reads a timestamp: a duration since start, an RFC 3339 time,
// or ms since the epoch.
func parseTime(s string, start time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return start.Add(d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, fmt.Errorf("timestamp %q: want a duration since the case's start (90s), an RFC 3339 time or ms since the epoch", s)
}

// versionHeader is left out of comparisons: it names a build.
const versionHeader = "wasmstream-version"

func (w want) matches(r Record) bool {
	if w.hasKey && !bytesEqual(w.key, r.Key) || w.hasValue && !bytesEqual(w.value, r.Value) {
		return false
	}
	if w.hasTS && !w.ts.Equal(r.Timestamp) {
		return false
	}
	for k, v := range w.headers {
		i := slices.IndexFunc(r.Headers, func(h Header) bool { return h.Key == k })
		if i < 0 || string(r.Headers[i].Value) != v {
			return false
		}
	}
	return true
}

// bytesEqual tells null from empty.
func bytesEqual(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// compare returns a diff of the expected records and the records got,
// empty when they match one for one in order: a line per record, "  "
// for one that matched, "- " for one expected and not got, "+ " for one
// got and not expected (the longest run of matches kept, as diff does).
func compare(start time.Time, expected []CaseRecord, got []Record) (string, error) {
	ws := make([]want, len(expected))
	show := shown{}
	for i, cr := range expected {
		var err error
		if ws[i], err = cr.want(start); err != nil {
			return "", fmt.Errorf("[%d]: %w", i, err)
		}
		show.ts = show.ts || ws[i].hasTS
		show.headers = show.headers || len(ws[i].headers) > 0
	}
	// lcs[i][j]: the most matches of ws[i:] with got[j:].
	lcs := make([][]int, len(ws)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(got)+1)
	}
	for i := len(ws) - 1; i >= 0; i-- {
		for j := len(got) - 1; j >= 0; j-- {
			if ws[i].matches(got[j]) {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	if lcs[0][0] == len(ws) && len(ws) == len(got) {
		return "", nil
	}
	var b strings.Builder
	i, j := 0, 0
	for i < len(ws) || j < len(got) {
		switch {
		case i < len(ws) && j < len(got) && ws[i].matches(got[j]) && lcs[i][j] == lcs[i+1][j+1]+1:
			b.WriteString("  " + show.record(start, got[j]) + "\n")
			i, j = i+1, j+1
		case j < len(got) && (i == len(ws) || lcs[i][j+1] > lcs[i+1][j]):
			b.WriteString("+ " + show.record(start, got[j]) + "\n")
			j++
		default:
			b.WriteString("- " + show.want(start, ws[i]) + "\n")
			i++
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// shown says which fields a diff shows: timestamps and headers only when
// the expectation names them.
type shown struct{ ts, headers bool }

func (s shown) record(start time.Time, r Record) string {
	parts := []string{"key=" + quote(r.Key), "value=" + quote(r.Value)}
	if s.ts {
		parts = append(parts, "timestamp="+showTime(start, r.Timestamp))
	}
	if s.headers {
		var hs []string
		for _, h := range r.Headers {
			if h.Key != versionHeader {
				hs = append(hs, h.Key+"="+quote(h.Value))
			}
		}
		parts = append(parts, "headers={"+strings.Join(hs, " ")+"}")
	}
	return strings.Join(parts, " ")
}

func (s shown) want(start time.Time, w want) string {
	var parts []string
	if w.hasKey {
		parts = append(parts, "key="+quote(w.key))
	}
	if w.hasValue {
		parts = append(parts, "value="+quote(w.value))
	}
	if w.hasTS {
		parts = append(parts, "timestamp="+showTime(start, w.ts))
	}
	if len(w.headers) > 0 {
		var hs []string
		for _, k := range sortedKeys(w.headers) {
			hs = append(hs, k+"="+strconv.Quote(w.headers[k]))
		}
		parts = append(parts, "headers={"+strings.Join(hs, " ")+"}")
	}
	if len(parts) == 0 {
		return "(any record)"
	}
	return strings.Join(parts, " ")
}

// quote shows bytes as a Go string, or null.
func quote(b []byte) string {
	if b == nil {
		return "null"
	}
	return strconv.Quote(string(b))
}

// showTime shows a time as a case writes it: since the start when after.
func showTime(start, t time.Time) string {
	if !t.Before(start) {
		return t.Sub(start).String()
	}
	return t.UTC().Format(time.RFC3339Nano)
}
