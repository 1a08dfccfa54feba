package state

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2"

	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ingestDirName is the directory, inside the state directory, where
// ApplyRestored writes sstables before it ingests them. Open empties it.
const ingestDirName = "restore-ingest"

// ingestRestored is ApplyRestored's path for large batches: the records (in
// key order through order; of equal keys the last wins) go to one sstable,
// the store's checkpoint to a second one, and Pebble ingests both in one
// call.
//
// Why: a restore batch written as a Pebble batch costs a write-ahead log
// write, a memtable insert (or, over half a memtable, a flush of its own)
// and a flush to a level-0 table, which compactions then merge; written as
// an sstable and ingested it costs the table only, and a table whose keys
// overlap nothing in the LSM (a changelog written in key order) goes
// straight to the bottom level and is never compacted again. The checkpoint
// has a table of its own because it is the one key every batch of a store
// writes: in the data table it would make every table overlap the previous
// one, and all of them would go through level 0 and compactions. See
// RATIONALE.md (State) for the figures.
//
// Why it keeps invariant I3:
//
//   - Pebble ingests the tables of one Ingest call atomically: one MANIFEST
//     edit (or, when they overlap a memtable, one write-ahead log record),
//     one sequence number. A crash leaves the data with its checkpoint, or
//     neither (TestIngestAtomicUnderCrash, TestIngestAtomicAtEveryStep).
//   - The ingested keys get a sequence number above every write made
//     before, so they shadow the store's older values and tombstones, as a
//     batch would. Nothing of this task is written meanwhile: the Task is
//     used by one goroutine and does not restore while it has processed
//     writes staged (ErrPendingWrites).
//   - A write made before and not yet durable (the write-ahead log is not
//     synced by default) cannot be lost while the ingest survives in a way
//     that matters: every batch that writes a store's data also writes its
//     checkpoint (Apply, ApplyRestored) or deletes the task's whole range
//     (Wipe), and the ingest holds that checkpoint key, so while such a
//     batch is in a memtable the ingest overlaps it and Pebble orders the
//     ingest after it: it waits for the memtable's flush, or logs the ingest
//     in a new write-ahead log file after closing, and so syncing, the one
//     that holds the batch. Lost unsynced batches of other stores and tasks
//     leave those consistent, as without ingestion; and as the tables hold
//     only this store's keys, such batches in the memtable do not make the
//     ingest wait for a flush (TestIngestLeavesOthersInMemtable).
//   - The tables are synced before the ingest (Writer.Close) and the ingest
//     syncs the directory and the MANIFEST. A crash before the ingest leaves
//     files in ingestDirName, which Open removes.
func (t *Task) ingestRestored(s *store, recs []Change, order []int32, nextOffset int64, size int) error {
	db := t.db
	wo := db.popts.MakeWriterOptions(0, db.pdb.TableFormat())
	wo.Compression = whereItPays(wo.Compression)
	base := db.fs.PathJoin(db.ingestDir, strconv.FormatUint(db.ingestSeq.Add(1), 10))
	data, cp := base+".sst", base+"-checkpoint.sst"
	fail := func(what string, err error) error {
		_ = db.fs.Remove(data)
		_ = db.fs.Remove(cp)
		return fmt.Errorf("state: task %s store %q: %s %d restored records: %w", t, s.name, what, len(recs), err)
	}

	// The tables are written and ingested by one guarded write (DB.write):
	// it may outlive the call when the disk does not answer, so it uses no
	// buffer of the Task's (order is the Task's scratch: copied).
	pdb, order := db.pdb, slices.Clone(order)
	return db.write(t.what(fmt.Sprintf("%d restored records", len(recs)), s), size, func() error {
		return writeIngest(db, pdb, s, recs, order, nextOffset, wo, data, cp, fail)
	})
}

// writeIngest is ingestRestored's write: the two tables, then the ingest.
func writeIngest(db *DB, pdb *pebble.DB, s *store, recs []Change, order []int32, nextOffset int64,
	wo sstable.WriterOptions, data, cp string, fail func(string, error) error) error {
	w, err := db.createTable(data, wo)
	if err != nil {
		return fail("writing", err)
	}
	var kbuf []byte
	for j, i := range order {
		r := &recs[i]
		if j+1 < len(order) && bytes.Equal(recs[order[j+1]].Key, r.Key) {
			continue // a later record of the same key follows; it wins
		}
		kbuf = append(append(kbuf[:0], s.data...), r.Key...)
		if r.Delete || r.Value == nil {
			err = w.Delete(kbuf)
		} else {
			err = w.Set(kbuf, r.Value)
		}
		if err != nil {
			_ = w.Close()
			return fail("writing", err)
		}
	}
	if err := w.Close(); err != nil { // flushes, syncs and closes the file
		return fail("writing", err)
	}

	w, err = db.createTable(cp, wo)
	if err != nil {
		return fail("writing", err)
	}
	if err := w.Set(s.cpKey, encodeOffset(nextOffset)); err != nil {
		_ = w.Close()
		return fail("writing", err)
	}
	if err := w.Close(); err != nil {
		return fail("writing", err)
	}

	if err := pdb.Ingest(context.Background(), []string{data, cp}); err != nil {
		return fail("ingesting", err)
	}
	return nil
}

// whereItPays returns p (the database's compression, Snappy by default) made
// adaptive for data blocks: a block is compressed with p's algorithm when
// that is estimated to save p.MinReductionPercent (12% for Snappy), the
// saving below which Pebble stores a block uncompressed anyway, and is not
// compressed otherwise. The estimate comes from a sample (Pebble's adaptive
// compressor compresses one block in ten both ways). Without it, values that
// do not compress (random, encrypted or already compressed payloads) cost a
// Snappy pass over every block for nothing: about 75 ns per 100-byte record
// in BenchmarkRestore, a fifth of the ingest path. Compressible values are
// compressed as by the rest of the database.
func whereItPays(p *sstable.CompressionProfile) *sstable.CompressionProfile {
	if p == nil || p.DataBlocks == sstable.NoCompression.DataBlocks {
		return p
	}
	a := *p
	a.Name = p.Name + "WhereItPays"
	a.OtherBlocks = sstable.NoCompression.OtherBlocks // the alternative; also index and other blocks
	if a.AdaptiveReductionCutoffPercent == 0 {
		a.AdaptiveReductionCutoffPercent = max(a.MinReductionPercent, 1)
	}
	return &a
}

// ingestBufferBytes is the write buffer of a table made for ingestion: one
// write system call per 256 KiB rather than per 4 KiB block.
const ingestBufferBytes = 256 << 10

// createTable creates an sstable file for ingestion. Its data is written
// back to disk as it grows (Pebble's BytesPerSync, as for its own tables),
// so the sync when it is closed has little left to do.
func (db *DB) createTable(path string, wo sstable.WriterOptions) (*sstable.Writer, error) {
	f, err := db.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	f = vfs.NewSyncingFile(f, vfs.SyncingFileOptions{BytesPerSync: db.popts.BytesPerSync})
	return sstable.NewWriter(&tableFile{f: f, w: bufio.NewWriterSize(f, ingestBufferBytes)}, wo), nil
}

// tableFile is the objstorage.Writable of a table made for ingestion.
type tableFile struct {
	f vfs.File
	w *bufio.Writer
}

var _ objstorage.Writable = (*tableFile)(nil)

func (t *tableFile) Write(p []byte) error {
	_, err := t.w.Write(p)
	return err
}

// Finish makes the table durable, as Pebble requires of a table it ingests.
func (t *tableFile) Finish() error {
	err := t.w.Flush()
	if err == nil {
		err = t.f.Sync()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (t *tableFile) Abort() { _ = t.f.Close() }
