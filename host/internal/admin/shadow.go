package admin

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/host/internal/shadow"
)

// GET /v1/processors/{name}/shadow: the processor's latest shadow run in
// this process (`wasmstream deploy --shadow`, host/internal/runner/shadow.go),
// running or stopped: its counts in total and by task, why it stopped,
// and the records the two versions did not agree on that this process
// kept (the first ones, at most maxShadowSamples; ?samples=N for fewer).
// 404 when the processor is unknown or has had no shadow run here. Each
// process answers for its own tasks; the diff topic
// <app_id>-<processor>-shadow has every process's (`wasmstream shadow
// status` sums them).
//
// Record contents are not shown: a sample says where its record is
// (input topic, partition, offset: read it there) and, for each version,
// how many records it emitted, the first ones' output, key and value
// lengths and header names, or its failure. The endpoint has no
// authentication (auth.go) and is reachable by any local user; the keys
// and values are user data, readable on the diff topic under the
// topic's ACLs. What a response holds is bounded: maxShadowSamples
// samples of at most 8 emits a side (the runner's bound), each with at
// most maxShadowHeaders header names of maxShadowNameBytes, and errors
// cut to maxShadowErrorBytes.

// The bounds of a shadow document.
const (
	maxShadowSamples    = 100
	maxShadowHeaders    = 16
	maxShadowNameBytes  = 64
	maxShadowErrorBytes = 512
)

// The /v1/processors/{name}/shadow document. Its shape is an API: fields
// are added, never renamed or removed, within v1.
type shadowDoc struct {
	Processor string          `json:"processor"`
	Version   string          `json:"version"`
	Started   time.Time       `json:"started"`
	Running   bool            `json:"running"`
	Stopped   string          `json:"stopped,omitempty"`
	Total     shadowCountsDoc `json:"total"`
	// Tasks are the counts of each task of this process that ran it.
	Tasks map[string]shadowCountsDoc `json:"tasks"`
	// SamplesTaken is how many differing records this process met (it
	// keeps the first of them: Samples).
	SamplesTaken int               `json:"samples_taken"`
	Samples      []shadowSampleDoc `json:"samples"`
}

type shadowCountsDoc struct {
	Records     int64   `json:"records"`
	Matches     int64   `json:"matches"`
	Differences int64   `json:"differences"`
	Failures    int64   `json:"failures"`
	MatchRate   float64 `json:"match_rate"`
}

type shadowSampleDoc struct {
	Task      string        `json:"task"`
	Topic     string        `json:"topic"`
	Partition int32         `json:"partition"`
	Offset    int64         `json:"offset"`
	Active    shadowSideDoc `json:"active"`
	Candidate shadowSideDoc `json:"candidate"`
}

type shadowSideDoc struct {
	// Count is how many records the version emitted; Emits describes the
	// first of them.
	Count int             `json:"count"`
	Emits []shadowEmitDoc `json:"emits"`
	Error string          `json:"error,omitempty"`
}

type shadowEmitDoc struct {
	Output   string   `json:"output"`
	KeyLen   int      `json:"key_len"`
	ValueLen int      `json:"value_len"`
	Headers  []string `json:"headers"` // names, but the version header
}

func (s *Server) shadow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	limit := maxShadowSamples
	if q := r.URL.Query().Get("samples"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("samples=%q: want a number from 0 to %d", q, maxShadowSamples), http.StatusBadRequest)
			return
		}
		limit = min(n, maxShadowSamples)
	}
	st, samples, ok := s.src.Shadow(name)
	if !ok {
		http.Error(w, fmt.Sprintf("processor %q has had no shadow run in this process (or there is no such processor)", name), http.StatusNotFound)
		return
	}
	doc := shadowDoc{Processor: name, Version: st.Version, Started: st.Started, Running: st.Running, Stopped: st.Stopped,
		Total: shadowCounts(st.Total), Tasks: make(map[string]shadowCountsDoc, len(st.Tasks)), SamplesTaken: st.Samples,
		Samples: make([]shadowSampleDoc, 0, min(limit, len(samples)))}
	for id, c := range st.Tasks {
		doc.Tasks[id] = shadowCounts(c)
	}
	for _, smp := range samples[:min(limit, len(samples))] {
		doc.Samples = append(doc.Samples, shadowSampleDoc{Task: smp.Task, Topic: smp.Topic, Partition: smp.Partition, Offset: smp.Offset,
			Active: shadowSide(smp.Active), Candidate: shadowSide(smp.Candidate)})
	}
	writeJSON(w, doc)
}

func shadowCounts(c shadow.Counts) shadowCountsDoc {
	return shadowCountsDoc{Records: c.Records, Matches: c.Matches, Differences: c.Differences, Failures: c.Failures, MatchRate: c.MatchRate()}
}

// shadowSide describes a side of a sample without its record contents.
func shadowSide(s shadow.Side) shadowSideDoc {
	d := shadowSideDoc{Count: s.Count, Emits: make([]shadowEmitDoc, 0, len(s.Emits)), Error: cut(s.Error, maxShadowErrorBytes)}
	for _, e := range s.Emits {
		names := make([]string, 0, len(e.Headers))
		for h := range e.Headers {
			names = append(names, h)
		}
		slices.Sort(names) // the first ones in order, the same at every request
		names = names[:min(len(names), maxShadowHeaders)]
		for i, h := range names {
			names[i] = cut(h, maxShadowNameBytes)
		}
		d.Emits = append(d.Emits, shadowEmitDoc{Output: e.Output, KeyLen: e.KeyLen, ValueLen: e.ValueLen, Headers: names})
	}
	return d
}

// cut returns s cut to at most n bytes, at a rune boundary, with "..."
// when it was cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
