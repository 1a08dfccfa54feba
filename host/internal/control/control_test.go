package control

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/host/internal/kclient"
	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// TestDeployRoundTrip deploys a module larger than Kafka's default
// max.message.bytes and checks the wire format record by record, then
// reads it back with a new Reader.
func TestDeployRoundTrip(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	mod := fakeModule(1, 1_800_000) // a Go plugin's size; 7 chunks
	sum := sha256.Sum256(mod)
	hash := hex.EncodeToString(sum[:])

	before := time.Now().UTC().Truncate(time.Millisecond)
	m, err := openPublisher(t, cfg).Deploy(ctx, "orders", mod, "v1.0", "alice@test")
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{Format: 1, Processor: "orders", Version: Version{Hash: hash, Size: 1_800_000, Chunks: 7, Label: "v1.0"},
		DeployedBy: "alice@test", DeployedAt: m.DeployedAt, Reason: ReasonDeploy, History: []Version{}, Offset: 7}
	if !equalManifest(m, want) || m.DeployedAt.Before(before) || m.DeployedAt.After(time.Now()) {
		t.Fatalf("Deploy returned\n%+v\nwant\n%+v", m, want)
	}

	// The records: the chunks in order, each under ChunkSize, then the
	// manifest with exactly the documented fields.
	recs := b.ReadCommitted(t, cfg.Topic, 30*time.Second)
	if len(recs) != 8 {
		t.Fatalf("%d records in the topic, want 7 chunks and a manifest", len(recs))
	}
	var joined []byte
	for i, r := range recs[:7] {
		if k := fmt.Sprintf("chunk/%s/%d", hash, i); string(r.Key) != k || len(r.Value) > ChunkSize || r.Offset != int64(i) {
			t.Fatalf("record %d: key %q (%d bytes) at offset %d, want key %q", i, r.Key, len(r.Value), r.Offset, k)
		}
		joined = append(joined, r.Value...)
	}
	if !bytes.Equal(joined, mod) {
		t.Fatal("the chunks do not concatenate to the module")
	}
	if string(recs[7].Key) != "processor/orders" {
		t.Fatalf("last record key %q", recs[7].Key)
	}
	var fields map[string]any
	if err := json.Unmarshal(recs[7].Value, &fields); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range fields {
		names = append(names, k)
	}
	slices.Sort(names)
	if got, wantNames := strings.Join(names, ","), "chunks,deployed_at,deployed_by,format,hash,history,label,processor,reason,size"; got != wantNames {
		t.Fatalf("manifest fields %s, want %s\n%s", got, wantNames, recs[7].Value)
	}
	if fields["format"] != 1.0 || fields["hash"] != hash || fields["size"] != 1.8e6 || fields["reason"] != "deploy" {
		t.Fatalf("manifest %s", recs[7].Value)
	}
	if h, ok := fields["history"].([]any); !ok || len(h) != 0 {
		t.Fatalf("history %#v, want []", fields["history"])
	}
	if at, err := time.Parse(time.RFC3339, fields["deployed_at"].(string)); err != nil || !at.Equal(m.DeployedAt) {
		t.Fatalf("deployed_at %v: %v", fields["deployed_at"], err)
	}

	st := load(t, cfg)
	got, err := st.Manifest("orders")
	if err != nil || !equalManifest(got, m) {
		t.Fatalf("Load: %+v, %v\nwant %+v", got, err, m)
	}
	back, err := st.Module(testCtx(t, 30*time.Second), hash)
	if err != nil || !bytes.Equal(back, mod) {
		t.Fatalf("Module: %d bytes, %v", len(back), err)
	}
	if _, err := st.Manifest("payments"); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("Manifest of an unknown processor: %v", err)
	}
	if p := st.Processors(); !slices.Equal(p, []string{"orders"}) {
		t.Fatalf("Processors %v", p)
	}
}

// TestDeployRollback walks a processor through initial, deploys and
// rollbacks, with the history checked at each step, and two publishers
// racing to roll back the same version.
func TestDeployRollback(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	v := make([]Version, 4)
	mods := make([][]byte, 4)
	for i := range mods {
		mods[i] = fakeModule(uint64(10+i), 1000+ChunkSize*(i%2)) // v1 and v3 take two chunks
		v[i] = NewVersion(mods[i], fmt.Sprintf("v%d", i))
	}
	step := func(what string, m Manifest, err error, active Version, reason string, history ...Version) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if m.Version != active || m.Reason != reason || !slices.Equal(m.History, history) {
			t.Fatalf("%s: active %s reason %q history %v; want %s %q %v", what, m.Version, m.Reason, m.History, active, reason, history)
		}
		st := load(t, cfg)
		got, err := st.Manifest("p")
		if err != nil || !equalManifest(got, m) {
			t.Fatalf("%s: a new Reader sees %+v, %v\nwant %+v", what, got, err, m)
		}
		mod, err := st.Module(testCtx(t, 30*time.Second), active.Hash)
		if err != nil || !bytes.Equal(mod, mods[slices.Index(v, active)]) {
			t.Fatalf("%s: Module of the active version: %d bytes, %v", what, len(mod), err)
		}
	}

	chunkKeys := func(v Version) int { return len(keysWithPrefix(t, b, cfg, "chunk/"+v.Hash+"/")) }

	// A deploy of v0 that died before its manifest left its chunks. No
	// manifest references them, so readers may have dropped them: they
	// are written again.
	b.ProduceTo(t, 0, raw(cfg, chunkKey(v[0].Hash, 0), mods[0]))
	m, published, err := pub.DeployInitial(ctx, "p", mods[0], "v0", "config")
	step("initial", m, err, v[0], ReasonInitial)
	if !published {
		t.Fatal("DeployInitial on an empty topic did not publish")
	}
	if n := chunkKeys(v[0]); n != 2 {
		t.Fatalf("%d chunk records of v0, want 2 (the dead deploy's and the initial's)", n)
	}
	end := endOffset(t, b, cfg)
	m, published, err = pub.DeployInitial(ctx, "p", mods[1], "v1", "config")
	step("second initial", m, err, v[0], ReasonInitial)
	if published || endOffset(t, b, cfg) != end {
		t.Fatalf("DeployInitial over a manifest published %v, end offset %d -> %d", published, end, endOffset(t, b, cfg))
	}
	if _, err := pub.Deploy(ctx, "p", mods[0], "again", "bob"); !errors.Is(err, ErrAlreadyActive) || !strings.Contains(err.Error(), "already runs") {
		t.Fatalf("deploying the active version: %v", err)
	}

	m, err = pub.Deploy(ctx, "p", mods[1], "v1", "bob")
	step("deploy v1", m, err, v[1], ReasonDeploy, v[0])
	m, err = pub.Deploy(ctx, "p", mods[2], "v2", "bob")
	step("deploy v2", m, err, v[2], ReasonDeploy, v[1], v[0])

	// Redeploying v1, which a history references, writes no chunk again.
	if n := chunkKeys(v[1]); n != 2 {
		t.Fatalf("%d chunk records of v1, want 2", n)
	}
	m, err = pub.Deploy(ctx, "p", mods[1], "v1", "bob")
	step("redeploy v1", m, err, v[1], ReasonDeploy, v[2], v[1], v[0])
	if n := chunkKeys(v[1]); n != 2 {
		t.Fatalf("redeploy rewrote chunks: %d chunk records of v1, want 2", n)
	}
	m, err = pub.Deploy(ctx, "p", mods[3], "v3", "bob")
	step("deploy v3", m, err, v[3], ReasonDeploy, v[1], v[2], v[1], v[0])

	// Two processes find v3 bad. B rolls back first; A, whose view is
	// older, reads the topic again before writing and does nothing.
	pubB := openPublisher(t, cfg)
	m, err = pubB.Rollback(ctx, "p", AutoRollback("trap in process"), v[3].Hash, "host-b")
	step("auto-rollback by B", m, err, v[1], "auto-rollback: trap in process", v[2], v[1], v[0])
	end = endOffset(t, b, cfg)
	if _, err := pub.Rollback(ctx, "p", AutoRollback("trap in process"), v[3].Hash, "host-a"); !errors.Is(err, ErrActiveChanged) {
		t.Fatalf("rollback with a stale expectHash: %v", err)
	}
	if e := endOffset(t, b, cfg); e != end {
		t.Fatalf("rollback with a stale expectHash wrote: end offset %d -> %d", end, e)
	}

	m, err = pub.Rollback(ctx, "p", "", "", "carol")
	step("rollback", m, err, v[2], ReasonRollback, v[1], v[0])
	m, err = pub.Rollback(ctx, "p", "", v[2].Hash, "carol")
	step("rollback", m, err, v[1], ReasonRollback, v[0])
	m, err = pub.Rollback(ctx, "p", "", "", "carol")
	step("rollback", m, err, v[0], ReasonRollback)
	if _, err := pub.Rollback(ctx, "p", "", "", "carol"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback without history: %v", err)
	}
	if _, err := pub.Rollback(ctx, "nobody", "", "", "carol"); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("rollback of a processor without manifest: %v", err)
	}
}

// TestHistoryBounded deploys more versions than MaxHistory: the history
// keeps the latest, and a Reader that read the topic to its end keeps no
// module's bytes: it reads them again from the topic when asked for.
func TestHistoryBounded(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	const n = MaxHistory + maxUnreferenced + 4
	var vs []Version
	for i := range n {
		m, err := pub.Deploy(ctx, "p", fakeModule(uint64(100+i), 500), fmt.Sprint(i), "bob")
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, m.Version)
	}
	r := openReader(t, cfg)
	st, err := r.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Manifest("p")
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(vs[n-1-MaxHistory : n-1])
	slices.Reverse(want)
	if m.Version != vs[n-1] || !slices.Equal(m.History, want) {
		t.Fatalf("active %s history %v, want %s %v", m.Version, m.History, vs[n-1], want)
	}
	for _, v := range append(want, m.Version) {
		if _, err := st.Module(testCtx(t, 30*time.Second), v.Hash); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for _, cs := range r.st.chunks {
		for _, p := range cs.parts {
			if p.data != nil {
				held++
				break
			}
		}
	}
	if held > 0 || len(r.st.chunks) > MaxHistory+1+maxUnreferencedKnown {
		t.Fatalf("the reader holds the bytes of %d contents and knows %d, want none and at most %d",
			held, len(r.st.chunks), MaxHistory+1+maxUnreferencedKnown)
	}
	if _, err := st.Module(testCtx(t, 30*time.Second), vs[0].Hash); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("Module of a version in no history: %v", err)
	}

	// Redeploying a version that fell out of every history writes its
	// chunks again: readers have dropped the old ones (a new Reader drops
	// them while it loads, before the manifest that wants them again).
	m, err = pub.Deploy(ctx, "p", fakeModule(100, 500), "0", "bob")
	if err != nil || m.Version != vs[0] {
		t.Fatalf("redeploy of version 0: %+v %v", m, err)
	}
	if _, err := load(t, cfg).Module(testCtx(t, 30*time.Second), vs[0].Hash); err != nil {
		t.Fatalf("a new Reader after the redeploy: %v", err)
	}
}

// TestHistoryBytesGone: a version only in a history is read again from the
// topic when asked for; once its chunks are deleted from the topic, asking
// for it is an ErrCorrupt that says so, and a rollback skips it.
// (Deleting records from the control topic is for kfake only: real Kafka
// refuses DeleteRecords on a compacted topic.)
func TestHistoryBytesGone(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	old, err := pub.Deploy(ctx, "p", fakeModule(7, ChunkSize+100), "old", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Deploy(ctx, "p", fakeModule(8, 100), "mid", "bob"); err != nil {
		t.Fatal(err)
	}
	cur, err := pub.Deploy(ctx, "p", fakeModule(9, 100), "new", "bob")
	if err != nil {
		t.Fatal(err)
	}
	st := load(t, cfg)
	if got, err := st.Module(ctx, old.Hash); err != nil || !bytes.Equal(got, fakeModule(7, ChunkSize+100)) {
		t.Fatalf("a version in the history, read again: %d bytes, %v", len(got), err)
	}
	b.RequireFake(t, "real Kafka refuses DeleteRecords on a compacted topic (POLICY_VIOLATION)")
	// Everything before the current version's chunks goes.
	b.DeleteRecords(t, cfg.Topic, 0, cur.Offset-1)
	_, err = st.Module(ctx, old.Hash)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "no longer in the topic") {
		t.Fatalf("a version whose chunks were deleted: %v, want ErrCorrupt saying they are gone", err)
	}
	// A publisher that read the topic before the deletion skips both
	// previous versions, whose bytes are gone, and so has none to roll
	// back to.
	if _, err := pub.Rollback(ctx, "p", "", "", "carol"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("rollback onto deleted versions: %v, want ErrNoPrevious", err)
	}
}

// TestFollow: a Reader that loaded the topic sees later deploys and a
// rollback, in order, with their bytes.
func TestFollow(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	mods := [][]byte{fakeModule(1, 3000), fakeModule(2, 1_800_000), fakeModule(3, 4000)}
	if _, err := pub.Deploy(ctx, "p", mods[0], "v0", "bob"); err != nil {
		t.Fatal(err)
	}
	r := openReader(t, cfg)
	st, err := r.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Manifest("p"); err != nil || m.Label != "v0" {
		t.Fatalf("Load: %+v %v", m, err)
	}
	events := follow(t, r)

	var want []Manifest
	for i, mod := range mods[1:] {
		m, err := pub.Deploy(ctx, "p", mod, fmt.Sprintf("v%d", i+1), "bob")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m)
	}
	m, err := pub.Rollback(ctx, "p", "", "", "carol")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, m)
	wantMods := [][]byte{mods[1], mods[2], mods[1]}
	for i, w := range want {
		ev := next(t, events)
		if ev.err != nil || !equalManifest(ev.m, w) || !bytes.Equal(ev.module, wantMods[i]) {
			t.Fatalf("callback %d: %s %q at %d, %d bytes, %v; want %s %q at %d",
				i, ev.m.Version, ev.m.Reason, ev.m.Offset, len(ev.module), ev.err, w.Version, w.Reason, w.Offset)
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected callback %+v", ev)
	case <-time.After(200 * time.Millisecond):
	}
}

// TestCorruptRecords: records another tool wrote (undecodable manifests,
// missing chunks, wrong bytes, a newer format, unknown keys) are reported
// for their processor alone, by Load and by Follow; the publisher refuses
// to build on them where it must.
func TestCorruptRecords(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	good := fakeModule(1, 5000)
	gm, err := pub.Deploy(ctx, "good", good, "g1", "bob")
	if err != nil {
		t.Fatal(err)
	}
	r := openReader(t, cfg)
	if _, err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	events := follow(t, r)

	manifest := func(processor string, v Version, history ...Version) []byte {
		return encodeManifest(Manifest{Format: Format, Processor: processor, Version: v, Reason: "deploy", History: history})
	}
	// "missing": two chunks announced, one written.
	twoChunks := fakeModule(2, ChunkSize+10)
	missing := NewVersion(twoChunks, "m")
	// "mismatch": one chunk whose bytes do not hash to the manifest's hash.
	mismatch := NewVersion(fakeModule(3, 100), "x")
	future := strings.Replace(string(manifest("future", gm.Version)), `"format":1`, `"format":2,"new":{"x":1}`, 1)
	b.ProduceTo(t, 0,
		raw(cfg, "processor/badjson", []byte("{not json")),
		raw(cfg, chunkKey(missing.Hash, 0), chunk(twoChunks, 0)),
		raw(cfg, "processor/missing", manifest("missing", missing)),
		raw(cfg, chunkKey(mismatch.Hash, 0), fakeModule(4, 100)),
		raw(cfg, "processor/mismatch", manifest("mismatch", mismatch)),
		raw(cfg, "processor/future", []byte(future)),
		raw(cfg, "processor/renamed", manifest("other", gm.Version)),
		raw(cfg, "processor/badhist", manifest("badhist", gm.Version, missing)),
		// Ignored: unknown keys and chunk keys that do not parse. (A record
		// without a key is ignored too, but real Kafka refuses it in a
		// compacted topic, INVALID_RECORD; kfake accepts it.)
		raw(cfg, "something/else", []byte("x")),
		raw(cfg, "chunk/zz/0", []byte("x")),
		raw(cfg, "chunk/"+missing.Hash+"/-1", []byte("x")),
	)
	// "later": a good manifest overwritten by garbage has no manifest.
	if _, err := pub.Deploy(ctx, "later", good, "g1", "bob"); err != nil {
		t.Fatal(err)
	}
	b.ProduceTo(t, 0, raw(cfg, "processor/later", []byte(`{"format":1,"processor":"later","hash":"short"}`)))
	good2 := fakeModule(5, 6000)
	gm2, err := pub.Deploy(ctx, "good", good2, "g2", "bob")
	if err != nil {
		t.Fatal(err)
	}

	// Follow: one callback per manifest record, in order.
	type expect struct {
		processor string
		is        error  // nil: no error
		msg       string // in the error
	}
	for i, w := range []expect{
		{"badjson", ErrCorrupt, `manifest "processor/badjson" at offset`},
		{"missing", ErrCorrupt, "1 of 2 chunks missing (1)"},
		{"mismatch", ErrCorrupt, "not to the manifest's hash"},
		{"future", ErrFormat, "format 2"},
		{"renamed", ErrCorrupt, `processor field "other" differs`},
		{"badhist", nil, ""},
		{"later", nil, ""},
		{"later", ErrCorrupt, "active version: hash"},
		{"good", nil, ""},
	} {
		ev := next(t, events)
		if ev.m.Processor != w.processor || (w.is == nil) != (ev.err == nil) || !errors.Is(ev.err, w.is) ||
			(w.msg != "" && !strings.Contains(ev.err.Error(), w.msg)) || (ev.err != nil) != (ev.module == nil) {
			t.Fatalf("callback %d: processor %q, %d bytes, error %v; want %q, %v containing %q", i, ev.m.Processor, len(ev.module), ev.err, w.processor, w.is, w.msg)
		}
		if ev.err != nil {
			t.Logf("%s: %v", w.processor, ev.err)
		}
		if w.processor == "good" && (!equalManifest(ev.m, gm2) || !bytes.Equal(ev.module, good2)) {
			t.Fatalf("good: %+v", ev.m)
		}
	}

	// Load: the same verdicts, per processor.
	st := load(t, cfg)
	if got := st.Processors(); !slices.Equal(got, []string{"badhist", "badjson", "future", "good", "later", "mismatch", "missing", "renamed"}) {
		t.Fatalf("Processors %v", got)
	}
	if _, err := st.Manifest("badjson"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), cfg.Topic) {
		t.Fatalf("badjson: %v", err)
	}
	if _, err := st.Manifest("later"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("later: %v", err)
	}
	if _, err := st.Manifest("future"); !errors.Is(err, ErrFormat) {
		t.Fatalf("future: %v", err)
	}
	for _, v := range []Version{missing, mismatch} {
		if _, err := st.Module(testCtx(t, 30*time.Second), v.Hash); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Module(%s): %v", v, err)
		}
	}
	if got, err := st.Module(testCtx(t, 30*time.Second), gm2.Hash); err != nil || !bytes.Equal(got, good2) {
		t.Fatalf("good: %v", err)
	}

	// The publisher: no rollback from an undecodable manifest or to broken
	// bytes, no overwriting a newer format; a deploy replaces garbage.
	end := endOffset(t, b, cfg)
	if _, err := pub.Rollback(ctx, "badjson", "", "", "carol"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("rollback of badjson: %v", err)
	}
	// badhist's only previous version has a chunk missing: it is skipped,
	// which leaves nothing to roll back to (TestUnrunnableVersions...).
	if _, err := pub.Rollback(ctx, "badhist", "", "", "carol"); !errors.Is(err, ErrNoPrevious) || !strings.Contains(err.Error(), "chunks missing") {
		t.Fatalf("rollback to a version with a missing chunk: %v", err)
	}
	if _, err := pub.Deploy(ctx, "future", good, "g", "bob"); !errors.Is(err, ErrFormat) {
		t.Fatalf("deploy over a newer format: %v", err)
	}
	if _, _, err := pub.DeployInitial(ctx, "future", good, "g", "bob"); !errors.Is(err, ErrFormat) {
		t.Fatalf("initial over a newer format: %v", err)
	}
	if e := endOffset(t, b, cfg); e != end {
		t.Fatalf("refused calls wrote records: end offset %d -> %d", end, e)
	}
	if m, err := pub.Deploy(ctx, "badjson", good, "g", "bob"); err != nil || len(m.History) != 0 {
		t.Fatalf("deploy over badjson: %+v %v", m, err)
	}
	if m, published, err := pub.DeployInitial(ctx, "renamed", good, "g", "bob"); err != nil || !published || m.Reason != ReasonInitial {
		t.Fatalf("initial over an undecodable manifest: %+v %v %v", m, published, err)
	}
	if m, err := load(t, cfg).Manifest("badjson"); err != nil || m.Hash != gm.Hash {
		t.Fatalf("badjson after deploy: %+v %v", m, err)
	}
}

// TestAbortedTransaction: a manifest written in an aborted transaction (by
// another tool) is never applied, and a log that ends with the abort marker
// is still read to its end (the marker moves the position).
func TestAbortedTransaction(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	m1, err := pub.Deploy(ctx, "p", fakeModule(1, 1000), "v1", "bob")
	if err != nil {
		t.Fatal(err)
	}
	r := openReader(t, cfg)
	if _, err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	events := follow(t, r)

	txn := b.Client(t, kgo.TransactionalID(b.Name(t, "txn")), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	mod := fakeModule(2, 1000)
	v := NewVersion(mod, "aborted")
	if err := txn.ProduceSync(ctx,
		raw(cfg, chunkKey(v.Hash, 0), mod),
		raw(cfg, manifestKey("p"), encodeManifest(Manifest{Format: Format, Processor: "p", Version: v, Reason: "deploy"})),
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	st := load(t, cfg)
	if m, err := st.Manifest("p"); err != nil || !equalManifest(m, m1) {
		t.Fatalf("after an aborted manifest: %+v %v, want %+v", m, err, m1)
	}
	t.Logf("loaded a log ending with an abort marker in %v", time.Since(start))

	m3, err := pub.Deploy(ctx, "p", fakeModule(3, 1000), "v3", "bob")
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, events); ev.err != nil || !equalManifest(ev.m, m3) {
		t.Fatalf("first callback after the aborted transaction: %+v %v, want %+v", ev.m, ev.err, m3)
	}
}

// TestProduceFailure: a produce the broker refuses fails the call with an
// error naming the topic, and leaves no manifest behind; the next call
// works.
func TestProduceFailure(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "injects a produce error")
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)
	b.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.TopicAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	mod := fakeModule(1, 1000)
	_, err := pub.Deploy(ctx, "p", mod, "v1", "bob")
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || !strings.Contains(err.Error(), "control topic "+cfg.Topic+": deploy to processor \"p\": writing 1 chunks") {
		t.Fatalf("Deploy with a refused produce: %v", err)
	}
	t.Log(err)
	if _, err := load(t, cfg).Manifest("p"); !errors.Is(err, ErrNoManifest) {
		t.Fatalf("after a failed deploy: %v", err)
	}
	if _, err := pub.Deploy(ctx, "p", mod, "v1", "bob"); err != nil {
		t.Fatalf("Deploy after the failure: %v", err)
	}
}

// TestLoadEmptyOrMissing: an empty topic loads at once; a missing one is
// an error that says so.
func TestLoadEmptyOrMissing(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	start := time.Now()
	st := load(t, cfg)
	if d := time.Since(start); d > 3*time.Second || len(st.Processors()) != 0 {
		t.Fatalf("empty topic: %v in %v", st.Processors(), d)
	}
	missing := Config{Kafka: kclient.Config{Brokers: b.Addrs()}, Topic: b.Name(t, "missing")}
	_, err := openReader(t, missing).Load(testCtx(t, 10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Load of a missing topic: %v", err)
	}
	if _, err := openPublisher(t, missing).Deploy(testCtx(t, 10*time.Second), "p", []byte("x"), "", ""); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Deploy to a missing topic: %v", err)
	}
}

// TestEnsureTopic: concurrent creation succeeds for every caller and makes
// the documented shape; a topic of another shape is refused.
func TestEnsureTopic(t *testing.T) {
	b := testbroker.New(t)
	ctx := testCtx(t, 30*time.Second)
	topic := b.Name(t, "plugins")
	adm := kadm.NewClient(b.Client(t))
	deleteAtEnd(t, b, adm, topic)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	kafka := kclient.Config{Brokers: b.Addrs()}
	for i := range errs {
		wg.Go(func() { errs[i] = EnsureTopic(ctx, kafka, topic) }) // a client each, as processes have
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTopic(ctx, kafka, topic); err != nil {
		t.Fatalf("EnsureTopic of an existing topic: %v", err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil || len(details[topic].Partitions) != 1 {
		t.Fatalf("partitions: %v %v", details[topic].Partitions, err)
	}
	rc, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := rc.On(topic, nil)
	for _, e := range c.Configs {
		if e.Key == "cleanup.policy" && e.MaybeValue() != "compact" {
			t.Fatalf("cleanup.policy=%s", e.MaybeValue())
		}
	}

	for _, bad := range []struct {
		partitions int
		configs    map[string]string
		msg        string
	}{
		{3, map[string]string{"cleanup.policy": "compact"}, "has 3 partitions"},
		{1, nil, "cleanup.policy=delete"},
		{1, map[string]string{"cleanup.policy": "compact,delete"}, "cleanup.policy=compact,delete"},
	} {
		name := b.Name(t, "bad")
		b.CreateTopic(t, name, bad.partitions, bad.configs)
		err := EnsureTopic(ctx, kafka, name)
		if !errors.Is(err, ErrTopicShape) || !strings.Contains(err.Error(), bad.msg) {
			t.Fatalf("EnsureTopic of a topic with %d partitions and %v: %v", bad.partitions, bad.configs, err)
		}
		t.Log(err)
	}
}

// TestEnsureTopicListsAgainSoon: when the first listing after the create
// does not show the topic yet (on Kafka, when the broker is slow to apply
// the creation to its metadata), EnsureTopic asks the broker again within
// a fraction of a second. franz-go answered the repeated listing from its
// cache for 5 s, which held a process's start for 5 s; the deadline here is
// well between the two.
func TestEnsureTopicListsAgainSoon(t *testing.T) {
	b := testbroker.New(t)
	b.RequireFake(t, "makes the broker answer the create before the topic exists")
	topic := b.Name(t, "plugins")
	adm := b.Admin(t)
	// The broker answers the create at once and creates the topic 500ms
	// later, after EnsureTopic's first listing.
	created := make(chan error, 1)
	b.Fake().ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		creq := req.(*kmsg.CreateTopicsRequest)
		resp := creq.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, rt := range creq.Topics {
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			resp.Topics = append(resp.Topics, st)
		}
		go func() {
			time.Sleep(500 * time.Millisecond)
			_, err := adm.CreateTopic(context.Background(), 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
			created <- err
		}()
		return resp, nil, true
	})
	ctx := testCtx(t, 3*time.Second)
	if err := EnsureTopic(ctx, kclient.Config{Brokers: b.Addrs()}, topic); err != nil {
		t.Fatalf("EnsureTopic of a topic that shows in metadata 500ms after its create: %v", err)
	}
	if err := <-created; err != nil {
		t.Fatal(err)
	}
}

// equalManifest compares manifests, with times compared as instants.
func equalManifest(a, b Manifest) bool {
	return a.Format == b.Format && a.Processor == b.Processor && a.Version == b.Version &&
		a.DeployedBy == b.DeployedBy && a.DeployedAt.Equal(b.DeployedAt) && a.Reason == b.Reason &&
		slices.Equal(a.History, b.History) && a.Offset == b.Offset
}
