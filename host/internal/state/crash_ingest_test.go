package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A changelog for the ingest crash tests: record i of a history sets key
// histKey(i) to "<i>", or deletes it (every 11th). A store restored or
// processed up to checkpoint c must hold exactly replay(c).
func histKey(i int) string { return fmt.Sprintf("k%02d", i*7%23) }

func histRec(i int) Change {
	if i%11 == 10 {
		return Change{Key: []byte(histKey(i)), Delete: true}
	}
	return Change{Key: []byte(histKey(i)), Value: []byte(strconv.Itoa(i))}
}

func replay(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		r := histRec(i)
		if r.Delete {
			delete(m, string(r.Key))
		} else {
			m[string(r.Key)] = string(r.Value)
		}
	}
	return m
}

// histWriter drives one task through restores (ApplyRestored batches in
// changelog order, unsorted and with repeated keys), processing (Apply
// windows) and wipes, every store following the same history, and knows
// which checkpoints its stores passed.
type histWriter struct {
	t      *testing.T
	db     *DB
	proc   string
	stores []string
	tk     *Task
	cp     []int // next record of each store's history
}

func newHistWriter(t *testing.T, db *DB, proc string, stores ...string) *histWriter {
	w := &histWriter{t: t, db: db, proc: proc, stores: stores, cp: make([]int, len(stores))}
	w.reassign()
	return w
}

// reassign takes a new handle for the task, as a new assignment does.
func (w *histWriter) reassign() { w.tk = w.db.Task(w.proc, 0, w.stores) }

// restore applies n records of store s's history as one restored batch.
func (w *histWriter) restore(s, n int) {
	w.t.Helper()
	recs := make([]Change, n)
	for j := range recs {
		recs[j] = histRec(w.cp[s] + j)
	}
	if err := w.tk.ApplyRestored(s, recs, int64(w.cp[s]+n)); err != nil {
		w.t.Fatalf("%s: ApplyRestored(%d, %d records): %v", w.proc, s, n, err)
	}
	w.cp[s] += n
}

// process applies a commit window of n records to every store.
func (w *histWriter) process(n int) {
	w.t.Helper()
	cps := map[int]int64{}
	for s := range w.stores {
		for j := range n {
			r := histRec(w.cp[s] + j)
			var err error
			if r.Delete {
				err = w.tk.Delete(s, r.Key)
			} else {
				err = w.tk.Put(s, r.Key, r.Value)
			}
			if err != nil {
				w.t.Fatal(err)
			}
			w.tk.CommitRecord()
		}
		w.cp[s] += n
		cps[s] = int64(w.cp[s])
	}
	if err := w.tk.Apply(cps); err != nil {
		w.t.Fatalf("%s: Apply: %v", w.proc, err)
	}
}

func (w *histWriter) wipe() {
	w.t.Helper()
	if err := w.tk.Wipe(); err != nil {
		w.t.Fatal(err)
	}
	clear(w.cp)
}

// checkHistImage opens a crash image and checks that every store of every
// task holds exactly the history up to its checkpoint: an ingest (or batch)
// visible without its checkpoint, or a checkpoint without its data, fails.
// A store without a checkpoint must be empty.
func checkHistImage(t *testing.T, img *vfs.MemFS, what string, tasks map[string][]string) {
	t.Helper()
	db, err := Open("db", Options{FS: img})
	if err != nil {
		t.Fatalf("%s: opening crash image: %v", what, err)
	}
	defer db.Close()
	for proc, stores := range tasks {
		tk := db.Task(proc, 0, stores)
		for s, name := range stores {
			cp, ok, err := tk.Checkpoint(s)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			if ok {
				want = replay(int(cp))
			}
			got := map[string]string{}
			for _, e := range scanAll(t, tk, s, "", "") {
				got[e.k] = e.v
			}
			if !maps.Equal(got, want) {
				t.Fatalf("%s: %s store %q: checkpoint %d (present %v) but the data is not the history up to it:\ngot  %v\nwant %v",
					what, proc, name, cp, ok, got, want)
			}
		}
	}
}

// TestIngestAtomicUnderCrash is TestApplyAtomicUnderCrash for restores
// written by ingestion (a small Options.IngestRestoredBytes sends most
// restored batches that way, the rest through Pebble batches), mixed with
// everything that can sit unsynced in the write-ahead log before an ingest:
// processed commit windows of the same task (its checkpoint keys in the
// memtable, so Pebble must order the ingest after them), wipes, batches of
// another task, restored batches below the threshold. At random moments a
// crash image (synced data plus a random part of the rest) must show each
// store's data exactly as its checkpoint says.
func TestIngestAtomicUnderCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fs := vfs.NewCrashableMem()
	db, err := Open("db", Options{FS: fs, IngestRestoredBytes: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := newHistWriter(t, db, "p", "a", "b")
	q := newHistWriter(t, db, "q", "c")
	tasks := map[string][]string{"p": p.stores, "q": q.stores}
	q.restore(0, 0)

	images := 0
	crash := func(what string) {
		img := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
		checkHistImage(t, img, what, tasks)
		images++
	}
	for round := range 12 {
		if round%5 == 4 {
			p.wipe()
			crash("after a wipe")
		}
		p.reassign() // a restore follows a (re)assignment
		for s := range p.stores {
			for range 1 + rng.IntN(4) {
				p.restore(s, 1+rng.IntN(60))
				if rng.IntN(2) == 0 {
					crash(fmt.Sprintf("round %d: after restoring store %d", round, s))
				}
				q.process(1 + rng.IntN(5)) // unsynced writes of another task between ingests
			}
		}
		for range 1 + rng.IntN(3) {
			p.process(1 + rng.IntN(8))
			if rng.IntN(2) == 0 {
				crash(fmt.Sprintf("round %d: after processing", round))
			}
		}
	}
	m := db.pdb.Metrics()
	t.Logf("%d crash images; %d ingests, %d of them behind a memtable (as flushable)", images, m.Ingest.Count, m.Flush.AsIngestCount)
	if m.Ingest.Count == 0 || m.Flush.AsIngestCount == 0 {
		t.Fatal("the test did not exercise both ingests that overlap a memtable and ingests that do not")
	}
}

// TestIngestAtomicAtEveryStep takes a crash image after every file system
// operation of each ingest (every write, sync, link, rename and removal:
// the table files, the directory, the MANIFEST, the write-ahead log), with
// none, all and a random half of the unsynced data, and checks each. An
// ingest must be visible with its checkpoint or not at all at every step;
// splitting the data and the checkpoint into two ingests fails here.
func TestIngestAtomicAtEveryStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fs := &stepImageFS{imageRecorder{MemFS: vfs.NewCrashableMem(), rng: rng}}
	db, err := Open("db", Options{FS: fs, IngestRestoredBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := newHistWriter(t, db, "p", "a", "b")
	tasks := map[string][]string{"p": p.stores}

	steps := 0
	ingest := func(s, n int, what string) {
		fs.record(true)
		p.restore(s, n)
		imgs := fs.record(false)
		for i, img := range imgs {
			checkHistImage(t, img, fmt.Sprintf("%s, image %d of %d", what, i+1, len(imgs)), tasks)
		}
		steps += len(imgs)
	}
	for round := range 4 {
		if round == 2 {
			p.wipe() // the next ingests overlap the wipe's range deletion in the memtable
		}
		p.reassign()
		for s := range p.stores {
			ingest(s, 5+rng.IntN(40), fmt.Sprintf("round %d store %d: first batch", round, s))
			ingest(s, 5+rng.IntN(40), fmt.Sprintf("round %d store %d: second batch", round, s))
		}
		p.process(3) // the next ingests overlap these windows in the memtable
	}
	t.Logf("%d crash images taken during ingests", steps)
}

// stepImageFS takes crash images of itself after every mutating operation
// while recording: with no unsynced data, all of it, and a random half.
type stepImageFS struct{ imageRecorder }

func (f *stepImageFS) snap() { f.take(0, 100, 50) }

func (f *stepImageFS) file(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return file, err
	}
	return &stepImageFile{File: file, fs: f}, nil
}

func (f *stepImageFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.MemFS.Create(name, c)
	f.snap()
	return f.file(file, err)
}

func (f *stepImageFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.MemFS.ReuseForWrite(oldname, newname, c)
	f.snap()
	return f.file(file, err)
}

func (f *stepImageFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return f.file(f.MemFS.OpenReadWrite(name, c, opts...))
}

func (f *stepImageFS) OpenDir(name string) (vfs.File, error) {
	return f.file(f.MemFS.OpenDir(name))
}

func (f *stepImageFS) Link(oldname, newname string) error {
	defer f.snap()
	return f.MemFS.Link(oldname, newname)
}

func (f *stepImageFS) Rename(oldname, newname string) error {
	defer f.snap()
	return f.MemFS.Rename(oldname, newname)
}

func (f *stepImageFS) Remove(name string) error {
	defer f.snap()
	return f.MemFS.Remove(name)
}

type stepImageFile struct {
	vfs.File
	fs *stepImageFS
}

func (w *stepImageFile) Write(p []byte) (int, error) {
	defer w.fs.snap()
	return w.File.Write(p)
}

func (w *stepImageFile) WriteAt(p []byte, off int64) (int, error) {
	defer w.fs.snap()
	return w.File.WriteAt(p, off)
}

func (w *stepImageFile) Sync() error {
	defer w.fs.snap()
	return w.File.Sync()
}

func (w *stepImageFile) SyncData() error {
	defer w.fs.snap()
	return w.File.SyncData()
}

func (w *stepImageFile) SyncTo(length int64) (bool, error) {
	defer w.fs.snap()
	return w.File.SyncTo(length)
}
