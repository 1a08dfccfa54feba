package admin

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// secret is a record's contents: the shadow document never shows it.
const secret = "card-4111111111111111"

// shadowSample is a differing record: the active version emitted one
// record, the candidate three with more headers than the document names.
func shadowSample(i int) shadow.Sample {
	emit := func(out string, hs int) shadow.Emit {
		e := shadow.Emit{Output: out, Key: []byte(secret), Value: []byte(secret), KeyLen: 100, ValueLen: 5000, Headers: map[string][]byte{}}
		for h := range hs {
			e.Headers["h"+strconv.Itoa(100+h)] = []byte(secret)
		}
		return e
	}
	return shadow.Sample{Task: "counts/words/" + strconv.Itoa(i%2), Topic: "words", Partition: int32(i % 2), Offset: int64(10 + i),
		Key: []byte(secret), Seq: int64(i),
		Active:    shadow.Side{Count: 1, Emits: []shadow.Emit{emit("counts", 1)}},
		Candidate: shadow.Side{Count: 3, Emits: []shadow.Emit{emit("counts", 40), emit("alerts", 0)}, Error: strings.Repeat("é", 1000) + secret}}
}

// GET /v1/processors/{name}/shadow: the run's status and its samples,
// where each record is and what each side emitted, never the records'
// contents; bounded; 404 for a processor without a shadow run.
func TestShadowEndpoint(t *testing.T) {
	src := newFake()
	started := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	var samples []shadow.Sample
	for i := range 150 {
		samples = append(samples, shadowSample(i))
	}
	src.set(func(f *fakeSource) {
		f.shadows = map[string]shadow.Status{"counts": {Processor: "counts", Version: "v2", Started: started, Running: false,
			Stopped: "operator", Total: shadow.Counts{Records: 10, Matches: 7, Differences: 2, Failures: 1},
			Tasks: map[string]shadow.Counts{"counts/words/0": {Records: 10, Matches: 7, Differences: 2, Failures: 1}}, Samples: 160}}
		f.samples = map[string][]shadow.Sample{"counts": samples}
	})
	s := start(t, src)

	resp, body := get(t, s, "/v1/processors/counts/shadow")
	expect(t, resp, body, 200, "application/json", "")
	for _, leak := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), "card-"} {
		if strings.Contains(body, leak) {
			t.Fatalf("the document shows record contents (%q)", leak)
		}
	}
	var doc shadowDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if doc.Processor != "counts" || doc.Version != "v2" || !doc.Started.Equal(started) || doc.Running || doc.Stopped != "operator" || doc.SamplesTaken != 160 {
		t.Errorf("status: %+v", doc)
	}
	wantCounts := shadowCountsDoc{Records: 10, Matches: 7, Differences: 2, Failures: 1, MatchRate: 0.7}
	if doc.Total != wantCounts || !reflect.DeepEqual(doc.Tasks, map[string]shadowCountsDoc{"counts/words/0": wantCounts}) {
		t.Errorf("counts: %+v %+v", doc.Total, doc.Tasks)
	}
	if len(doc.Samples) != maxShadowSamples {
		t.Fatalf("%d samples, want the first %d", len(doc.Samples), maxShadowSamples)
	}
	got := doc.Samples[1]
	if got.Task != "counts/words/1" || got.Topic != "words" || got.Partition != 1 || got.Offset != 11 {
		t.Errorf("sample 1 is at %+v", got)
	}
	if a := got.Active; a.Count != 1 || !reflect.DeepEqual(a.Emits, []shadowEmitDoc{{Output: "counts", KeyLen: 100, ValueLen: 5000, Headers: []string{"h100"}}}) || a.Error != "" {
		t.Errorf("active side: %+v", a)
	}
	c := got.Candidate
	if c.Count != 3 || len(c.Emits) != 2 || c.Emits[1].Output != "alerts" || len(c.Emits[1].Headers) != 0 {
		t.Errorf("candidate side: %+v", c)
	}
	if hs := c.Emits[0].Headers; len(hs) != maxShadowHeaders || hs[0] != "h100" || hs[maxShadowHeaders-1] != "h115" {
		t.Errorf("candidate headers: %v, want h100..h115", hs)
	}
	if len(c.Error) > maxShadowErrorBytes+len("...") || !strings.HasSuffix(c.Error, "é...") {
		t.Errorf("candidate error not cut at a rune to %d bytes: %d bytes, ends %q", maxShadowErrorBytes, len(c.Error), c.Error[len(c.Error)-8:])
	}

	// Fewer samples on request; none.
	_, body = get(t, s, "/v1/processors/counts/shadow?samples=2")
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.Samples) != 2 || doc.Samples[0].Offset != 10 {
		t.Errorf("samples=2: %v %d samples", err, len(doc.Samples))
	}
	_, body = get(t, s, "/v1/processors/counts/shadow?samples=0")
	if !strings.Contains(body, `"samples": []`) {
		t.Errorf("samples=0: %s", body)
	}
	resp, body = get(t, s, "/v1/processors/counts/shadow?samples=-1")
	if resp.StatusCode != 400 || !strings.Contains(body, "from 0 to 100") {
		t.Errorf("samples=-1: %d %q", resp.StatusCode, body)
	}
	// No shadow run, no such processor.
	for _, name := range []string{"nl-orders", "nope"} {
		resp, body = get(t, s, "/v1/processors/"+name+"/shadow")
		expect(t, resp, body, 404, textPlain, "")
		if !strings.Contains(body, "no shadow run") {
			t.Errorf("%s: %q", name, body)
		}
	}
	resp, body = do(t, s, "POST", "/v1/processors/counts/shadow")
	if resp.StatusCode != 405 {
		t.Errorf("POST: %d %q", resp.StatusCode, body)
	}
}
