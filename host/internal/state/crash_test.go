package state

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestApplyAtomicUnderCrash applies commit windows without fsync and, at
// random moments, takes a crash image of the file system (all synced data
// plus a random subset of the unsynced 4 KiB blocks: a torn write-ahead log)
// and opens it. In every image each store's data must match its checkpoint
// exactly: window w writes "n"=w in both stores, a large "pad<w%7>" value,
// and checkpoint w. If data and checkpoint were written by separate commits,
// an image would show one without the other. Wipes are interleaved: a wiped
// store must show neither data nor checkpoint.
func TestApplyAtomicUnderCrash(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	fs := vfs.NewCrashableMem()
	db, err := Open("db", Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stores := []string{"a", "b"}
	tk := restored(t, db, "p", 0, stores...)

	images, torn := 0, 0
	for w := 1; w <= 300; w++ {
		if w%97 == 0 {
			if err := tk.Wipe(); err != nil {
				t.Fatal(err)
			}
			for s := range stores {
				if err := tk.ApplyRestored(s, nil, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		pad := strings.Repeat(strconv.Itoa(w%10), 1500+rng.IntN(5000))
		for s := range stores {
			mustPut(t, tk, s, "n", strconv.Itoa(w))
			mustPut(t, tk, s, fmt.Sprintf("pad%d", w%7), fmt.Sprintf("%d:%s", w, pad))
		}
		tk.CommitRecord()
		if err := tk.Apply(map[int]int64{0: int64(w), 1: int64(w)}); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			img := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			if cp := checkImage(t, img, stores, w); cp < int64(w) {
				torn++
			}
			images++
		}
	}
	t.Logf("%d crash images checked; %d lost at least the newest window", images, torn)
	if torn == 0 {
		t.Fatal("no crash image lost a window: the test did not exercise torn writes")
	}
}

// checkImage opens a crash image and checks both stores; it returns the
// checkpoint found (-1 for none).
func checkImage(t *testing.T, img *vfs.MemFS, stores []string, last int) int64 {
	t.Helper()
	db, err := Open("db", Options{FS: img})
	if err != nil {
		t.Fatalf("opening crash image: %v", err)
	}
	defer db.Close()
	tk := db.Task("p", 0, stores)
	cps := make([]int64, len(stores))
	for s := range stores {
		cp, ok, err := tk.Checkpoint(s)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			cp = -1
		}
		cps[s] = cp
		got := scanAll(t, tk, s, "", "")
		if cp <= 0 {
			if len(got) != 0 {
				t.Fatalf("crash image (last window %d): store %q has checkpoint %d but holds %d keys", last, stores[s], cp, len(got))
			}
			continue
		}
		if cp > int64(last) {
			t.Fatalf("crash image: checkpoint %d beyond the last window %d", cp, last)
		}
		n, _ := mustGet(t, tk, s, "n")
		if n != strconv.FormatInt(cp, 10) {
			t.Fatalf("crash image (last window %d): store %q checkpoint %d but n=%q: data and checkpoint diverged", last, stores[s], cp, n)
		}
		for _, e := range got {
			if !strings.HasPrefix(e.k, "pad") {
				continue
			}
			w, _ := strconv.Atoi(strings.SplitN(e.v, ":", 2)[0])
			if int64(w) > cp {
				t.Fatalf("crash image: store %q holds window %d's %s beyond checkpoint %d", stores[s], w, e.k, cp)
			}
		}
	}
	if cps[0] != cps[1] && cps[0] > 0 && cps[1] > 0 {
		t.Fatalf("crash image: stores' checkpoints %v differ though every Apply wrote both", cps)
	}
	return min(cps[0], cps[1])
}

// TestApplyAtomicAtEveryWALWrite is the deterministic variant: with synced
// commits, every write to the write-ahead log is one commit, and an image is
// taken right after each write (exactly the bytes written so far). Every
// prefix of the log must therefore hold consistent (data, checkpoint) pairs:
// an Apply split into a data commit and a checkpoint commit fails here on
// the first window.
func TestApplyAtomicAtEveryWALWrite(t *testing.T) {
	fs := &imageFS{imageRecorder{MemFS: vfs.NewCrashableMem(), rng: rand.New(rand.NewPCG(1, 2))}}
	db, err := Open("db", Options{FS: fs, Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stores := []string{"a", "b"}
	tk := restored(t, db, "p", 0, stores...)
	fs.record(true)
	const windows = 40
	for w := 1; w <= windows; w++ {
		if w == windows/2 {
			if err := tk.Wipe(); err != nil {
				t.Fatal(err)
			}
			for s := range stores {
				if err := tk.ApplyRestored(s, nil, 0); err != nil {
					t.Fatal(err)
				}
			}
		}
		for s := range stores {
			mustPut(t, tk, s, "n", strconv.Itoa(w))
			mustPut(t, tk, s, fmt.Sprintf("pad%d", w%7), fmt.Sprintf("%d:x", w))
		}
		tk.CommitRecord()
		if err := tk.Apply(map[int]int64{0: int64(w), 1: int64(w)}); err != nil {
			t.Fatal(err)
		}
	}
	images := fs.record(false)
	if len(images) < windows {
		t.Fatalf("only %d log writes for %d synced windows", len(images), windows)
	}
	for _, img := range images {
		checkImage(t, img, stores, windows)
	}
	t.Logf("%d images, one per write-ahead log write", len(images))
}

// imageRecorder keeps crash images of a MemFS taken while recording.
type imageRecorder struct {
	*vfs.MemFS
	rng *rand.Rand

	mu     sync.Mutex
	on     bool
	images []*vfs.MemFS
}

// record turns recording on or off and returns the images taken so far.
func (f *imageRecorder) record(on bool) []*vfs.MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on = on
	imgs := f.images
	f.images = nil
	return imgs
}

// take, while recording, clones the file system as a crash would leave it,
// once per given share of the unsynced data kept (percent).
func (f *imageRecorder) take(unsyncedPercents ...int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.on {
		return
	}
	for _, pct := range unsyncedPercents {
		f.images = append(f.images, f.MemFS.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: f.rng}))
	}
}

// imageFS takes a crash image of itself after every write to a
// write-ahead log file while recording.
type imageFS struct{ imageRecorder }

func (f *imageFS) snap() { f.take(100) }

func (f *imageFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return &imageFile{File: file, fs: f}, nil
}

func (f *imageFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.MemFS.Create(name, c)
	return f.wrap(name, file, err)
}

func (f *imageFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.MemFS.ReuseForWrite(oldname, newname, c)
	return f.wrap(newname, file, err)
}

type imageFile struct {
	vfs.File
	fs *imageFS
}

func (w *imageFile) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	w.fs.snap()
	return n, err
}
