package control

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/internal/testbroker"
)

// TestUnrunnableVersionsNeverRollbackTargets: a manifest written straight to
// the topic by another tool, naming chunks that are not there, is refused by
// every process; it must not then become the "previous" version of the next
// deploy nor a rollback target, or one bad record takes rollback away.
func TestUnrunnableVersionsNeverRollbackTargets(t *testing.T) {
	b := testbroker.New(t)
	cfg := newTopic(t, b)
	ctx := testCtx(t, 30*time.Second)
	pub := openPublisher(t, cfg)

	mods := [][]byte{fakeModule(21, 3000), fakeModule(22, 4000), fakeModule(23, 5000)}
	v := make([]Version, len(mods))
	for i := range mods {
		v[i] = NewVersion(mods[i], "v"+string(rune('1'+i)))
	}
	if _, err := pub.Deploy(ctx, "p", mods[0], v[0].Label, "bob"); err != nil {
		t.Fatal(err)
	}
	// A ghost: 8 chunks announced, none written; its history is v1.
	ghostMod := fakeModule(24, 8*ChunkSize)
	ghost := NewVersion(ghostMod, "ghost")
	b.ProduceTo(t, 0, raw(cfg, "processor/p", encodeManifest(Manifest{
		Format: Format, Processor: "p", Version: ghost, Reason: ReasonDeploy, History: []Version{v[0]},
	})))

	// The next deploy replaces the ghost; the ghost does not enter the
	// history, so v1 is what it replaced as far as rollback is concerned.
	m, err := pub.Deploy(ctx, "p", mods[1], v[1].Label, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.History, []Version{v[0]}) {
		t.Fatalf("history after deploying over a ghost: %v, want [%s]", m.History, v[0])
	}
	if got, err := load(t, cfg).Manifest("p"); err != nil || !slices.Equal(got.History, []Version{v[0]}) {
		t.Fatalf("a new Reader sees history %v (%v), want [%s]", got.History, err, v[0])
	}
	m, err = pub.Rollback(ctx, "p", "", "", "carol")
	if err != nil {
		t.Fatalf("rollback after a ghost: %v", err)
	}
	if m.Version != v[0] || len(m.Skipped) != 0 {
		t.Fatalf("rolled back to %s (skipped %v), want %s", m.Version, m.Skipped, v[0])
	}

	// Another tool writes a manifest whose history holds the ghost between
	// two good versions: rollback passes over it, says so, and keeps only
	// runnable versions in the new history.
	b.ProduceTo(t, 0, raw(cfg, "processor/p", encodeManifest(Manifest{
		Format: Format, Processor: "p", Version: v[1], Reason: ReasonDeploy, History: []Version{ghost, v[0]},
	})))
	if _, err := pub.Deploy(ctx, "p", mods[2], v[2].Label, "bob"); err != nil {
		t.Fatal(err)
	}
	// History now [v2, v1] (the ghost was dropped by the deploy). Put the
	// ghost back at the head to test the skip in Rollback itself.
	b.ProduceTo(t, 0, raw(cfg, "processor/p", encodeManifest(Manifest{
		Format: Format, Processor: "p", Version: v[2], Reason: ReasonDeploy, History: []Version{ghost, v[1], ghost, v[0]},
	})))
	m, err = pub.Rollback(ctx, "p", "", "", "carol")
	if err != nil {
		t.Fatalf("rollback past a ghost: %v", err)
	}
	if m.Version != v[1] || !slices.Equal(m.History, []Version{v[0]}) {
		t.Fatalf("rolled back to %s with history %v; want %s with [%s]", m.Version, m.History, v[1], v[0])
	}
	if len(m.Skipped) != 1 || m.Skipped[0].Version != ghost || !strings.Contains(m.Skipped[0].Why, "chunks missing") {
		t.Fatalf("skipped %+v, want the ghost with its missing chunks", m.Skipped)
	}

	// Nothing runnable left: ErrNoPrevious, nothing written.
	b.ProduceTo(t, 0, raw(cfg, "processor/p", encodeManifest(Manifest{
		Format: Format, Processor: "p", Version: v[2], Reason: ReasonDeploy, History: []Version{ghost},
	})))
	end := endOffset(t, b, cfg)
	if _, err := pub.Rollback(ctx, "p", "", "", "carol"); !errors.Is(err, ErrNoPrevious) || !strings.Contains(err.Error(), "none of its 1 previous versions can run") {
		t.Fatalf("rollback with only a ghost behind: %v", err)
	}
	if e := endOffset(t, b, cfg); e != end {
		t.Fatalf("a refused rollback wrote: end offset %d -> %d", end, e)
	}
}
