//go:build smalldisk

package host

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/testutil"
)

// The disk-filling scenario on a real small file system
// (not a fault-injecting VFS): `make check-small-disk` mounts a 400 MB
// tmpfs, runs these tests with WASMSTREAM_SMALL_DISK naming it, and
// unmounts it. They are built only with the tag smalldisk, which `make
// test` never sets, and fail without the variable.

// smallDiskEnv names the directory of the small file system.
const smallDiskEnv = "WASMSTREAM_SMALL_DISK"

// smallDisk returns a fresh directory on the small file system, removed
// when the test ends.
func smallDisk(t *testing.T) string {
	root := os.Getenv(smallDiskEnv)
	if root == "" {
		t.Fatalf("%s names no directory: run these tests with `make check-small-disk`", smallDiskEnv)
	}
	dir, err := os.MkdirTemp(root, "state-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// freeBytes is the free space of the file system holding dir.
func freeBytes(t *testing.T, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// duBytes is what the files under dir hold.
func duBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

// fillRecords makes n records for diskfill of a random (incompressible)
// 60 KiB value each: 240 KiB of state per record.
func fillRecords(topic string, from, n int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		v := make([]byte, 60<<10)
		_, _ = rand.Read(v)
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "f%06d", from+i), Value: v})
	}
	return recs
}

// smallDiskPair is a diskPair whose filler is diskfill and whose state
// directory (both processors') is on the small file system.
func smallDiskPair(t *testing.T, dir string, stateDisk ByteSize) *diskPair {
	return newDiskPair(t, 5*time.Second, func(cfg *Config) {
		cfg.State.Dir = dir
		cfg.Processors[0].Plugin = engineTestdata("diskfill")
		cfg.Processors[0].Limits.StateDisk = stateDisk
	})
}

// limits.state_disk below the free space: the filler's puts get ELIMIT
// (diskfill fails the record, on_error: skip skips it), the file system
// never fills, the healthy processor beside it is untouched.
func TestSmallDiskBudgetBelowFreeSpace(t *testing.T) {
	dir := smallDisk(t)
	const budget = 16 << 20
	free0 := freeBytes(t, dir)
	p := smallDiskPair(t, dir, budget)
	const n = 400 // 96 MB of state asked for, 48 MB per task
	p.b.Produce(t, fillRecords(p.fin, 0, n)...)
	for range 3 {
		p.produce(p.hin, 20)
		testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	}
	testutil.Eventually(t, 120*time.Second, p.caughtUp(p.fin))
	st, _ := p.h.Stats("filler")
	if st.Skipped == 0 || st.Failures["plugin_failed"] != st.Skipped {
		t.Fatalf("the filler skipped %d records (failures %v): its puts were not refused at the budget", st.Skipped, st.Failures)
	}
	if code, body := httpGet(t, p.base+"/readyz"); code != http.StatusOK {
		t.Fatalf("readyz %d %s: a budget is not a failure", code, body)
	}
	_, metrics := httpGet(t, p.base+"/metrics")
	if strings.Contains(metrics, `wasmstream_state_write_failures_total{database="filler"`) &&
		!strings.Contains(metrics, `wasmstream_state_failed{database="filler"} 0`) {
		t.Errorf("the filler's database failed under its budget")
	}
	healthy, _ := p.h.Stats("healthy")
	if healthy.Skipped != 0 || healthy.Aborts != 0 {
		t.Errorf("the healthy processor skipped %d records and aborted %d transactions", healthy.Skipped, healthy.Aborts)
	}
	used := duBytes(p.cfg.ProcessorStateDir("filler"))
	t.Logf("free %d MB before; the filler skipped %d of %d records past %d MiB per task; its directory holds %.1f MB (2 tasks: budget %.1f MB); free after %d MB",
		free0>>20, st.Skipped, n, budget>>20, float64(used)/1e6, 2*float64(budget)/1e6, freeBytes(t, dir)>>20)
	if err := p.stop(); err != nil {
		t.Fatal(err)
	}
}

// A budget larger than the disk (the default 1 GiB per task, on 400 MB):
// the file system really fills (ENOSPC from the kernel). What the host
// must do (docs/operations.md, a full disk): the filler's database fails loudly (readyz,
// the metric, a reason naming the processor, its directory and the
// cause), it skips no record, the healthy processor stops only if it could
// not write either, the host stops when asked, and once space is freed a
// new host catches both up and the filler's store is exactly its
// changelog.
func TestSmallDiskFills(t *testing.T) {
	dir := smallDisk(t)
	// Ballast leaves 150 MB free; the filler asks for about 190 MB.
	ballast := filepath.Join(os.Getenv(smallDiskEnv), "ballast")
	writeBallast(t, ballast, freeBytes(t, dir)-150<<20)
	defer os.Remove(ballast)
	p := smallDiskPair(t, dir, 0)
	p.produce(p.hin, 20)
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))

	const n = 800
	p.b.Produce(t, fillRecords(p.fin, 0, n)...)
	start := time.Now()
	reason := p.unready()
	t.Logf("readyz after %.1fs: %s (free %d KB)", time.Since(start).Seconds(), reason, freeBytes(t, dir)>>10)
	for _, want := range []string{"filler", p.cfg.ProcessorStateDir("filler"), "no space left on the device"} {
		if !strings.Contains(reason, want) {
			t.Errorf("readyz says %q, which does not name %q", reason, want)
		}
	}
	_, metrics := httpGet(t, p.base+"/metrics")
	for _, want := range []string{`wasmstream_state_write_failures_total{database="filler",cause="no_space"} `, `wasmstream_state_failed{database="filler"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "wasmstream_state_failed") || strings.HasPrefix(l, "wasmstream_state_write_failures_total") {
			t.Logf("metric: %s", l)
		}
	}
	if st, _ := p.h.Stats("filler"); st.Skipped != 0 {
		t.Errorf("the filler skipped %d records for a full disk", st.Skipped)
	}

	// The healthy processor on the same file system, whose writes are a
	// few bytes each, keeps committing: the filler failed while the
	// reserve every database keeps for Pebble was still whole.
	for round := range 3 {
		p.produce(p.hin, 20)
		testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
		t.Logf("healthy round %d committed on the full disk, free %d KB", round, freeBytes(t, dir)>>10)
	}
	if _, m := httpGet(t, p.base+"/metrics"); !strings.Contains(m, `wasmstream_state_failed{database="healthy"} 0`) {
		t.Errorf("the healthy processor's database failed beside the filler's")
	}
	if st, _ := p.h.Stats("healthy"); st.Skipped != 0 || st.Aborts != 0 {
		t.Errorf("the healthy processor skipped %d records and aborted %d transactions", st.Skipped, st.Aborts)
	}
	stopStart := time.Now()
	err := p.stop()
	t.Logf("the host stopped %.2fs after its context ended; Close: %v", time.Since(stopStart).Seconds(), err)
	t.Logf("filler directory %.1f MB", float64(duBytes(p.cfg.ProcessorStateDir("filler")))/1e6)

	h, finish := restartFreed(t, p, ballast)
	p.produce(p.hin, 20)
	testutil.Eventually(t, 180*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	if st, _ := h.Stats("filler"); st.Skipped != 0 {
		t.Errorf("the filler skipped %d records after the restart", st.Skipped)
	}
	finish()
	t.Logf("after the restart: filler directory %.1f MB, free %d MB", float64(duBytes(p.cfg.ProcessorStateDir("filler")))/1e6, freeBytes(t, dir)>>20)
	storeIsExactlyChangelog(t, p, "filler", "counts", n*4)
}

// restartFreed frees the space ballast took and starts a new host on p's
// state directory (its admin endpoint off); finish stops it, checking Run's
// and Close's errors.
func restartFreed(t *testing.T, p *diskPair, ballast string) (h *Host, finish func()) {
	t.Helper()
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	cfg := *p.cfg
	cfg.Admin.Listen = ""
	h, err := New(context.Background(), &cfg, WithLogger(testLogger(t)))
	if err != nil {
		t.Fatalf("a new host on the directory, space freed: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	return h, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := h.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

// writeBallast writes a file of n bytes (really allocated: tmpfs has no
// holes to hide them in).
func writeBallast(t *testing.T, path string, n int64) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for ; n > 0; n -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), n)]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// storeIsExactlyChangelog checks, the host stopped, that the processor's
// store holds exactly the changelog's last value of every key (want keys).
func storeIsExactlyChangelog(t *testing.T, p *diskPair, processor, store string, want int) {
	changelog := map[string]string{}
	for _, r := range p.b.ReadCommitted(t, p.cfg.ChangelogTopic(store), 60*time.Second) {
		if r.Value == nil {
			delete(changelog, string(r.Key))
		} else {
			changelog[string(r.Key)] = string(r.Value)
		}
	}
	rd, err := OpenStateReadOnly(p.cfg.StateDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	stored := map[string]string{}
	for part := int32(0); part < 2; part++ {
		if err := rd.Scan(processor, part, store, func(k, v []byte) error {
			stored[string(k)] = string(v)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(stored) != want || len(changelog) != want {
		t.Errorf("the store holds %d keys, the changelog %d, %d were written", len(stored), len(changelog), want)
	}
	for k, v := range changelog {
		if s, ok := stored[k]; !ok || s != v {
			t.Errorf("key %q: the store's value differs from the changelog's (held %v)", k, ok)
		}
	}
}

// Another process fills the file system to the last byte under a running
// host (the kernel's ENOSPC, not the host's own space check, is what its
// databases meet when Pebble flushes or rotates its log). Whatever could
// not write fails with no_space, loudly; the process does not die (Pebble
// must not reach a full disk while rotating its log); the host stops when
// asked; once space is freed a new host catches both processors up and
// the filler's store is exactly its changelog.
func TestSmallDiskFilledByAnotherProcess(t *testing.T) {
	dir := smallDisk(t)
	p := smallDiskPair(t, dir, 0)
	p.b.Produce(t, fillRecords(p.fin, 0, 100)...) // 24 MB of state
	p.produce(p.hin, 20)
	testutil.Eventually(t, 120*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))

	ballast := filepath.Join(os.Getenv(smallDiskEnv), "ballast")
	defer os.Remove(ballast)
	fillUp(t, ballast)
	t.Logf("file system full: %d KB free", freeBytes(t, dir)>>10)
	p.b.Produce(t, fillRecords(p.fin, 100, 20)...)
	p.produce(p.hin, 20)
	reason := p.unready()
	t.Logf("readyz: %s", reason)
	if !strings.Contains(reason, "no space left on the device") {
		t.Errorf("readyz says %q, not that the disk is full", reason)
	}
	_, metrics := httpGet(t, p.base+"/metrics")
	for _, l := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(l, "wasmstream_state_failed") || strings.HasPrefix(l, "wasmstream_state_write_failures_total") && !strings.HasSuffix(l, " 0") {
			t.Logf("metric: %s", l)
		}
	}
	for _, proc := range []string{"filler", "healthy"} {
		if st, _ := p.h.Stats(proc); st.Skipped != 0 {
			t.Errorf("%s skipped %d records for a full disk", proc, st.Skipped)
		}
	}
	stopStart := time.Now()
	err := p.stop()
	t.Logf("the host stopped %.2fs after its context ended; Close: %v", time.Since(stopStart).Seconds(), err)

	_, finish := restartFreed(t, p, ballast)
	testutil.Eventually(t, 180*time.Second, p.caughtUp(p.fin))
	testutil.Eventually(t, 60*time.Second, p.caughtUp(p.hin))
	finish()
	storeIsExactlyChangelog(t, p, "filler", "counts", 120*4)
}

// fillUp writes path until the file system has no space left.
func fillUp(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	for n := len(buf) / 2; n > 0; n /= 2 { // the last blocks
		_, _ = f.Write(buf[:n])
	}
}
