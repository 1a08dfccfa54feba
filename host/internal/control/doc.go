// Package control reads and writes the control topic, "<app_id>-plugins":
// the source of truth for which plugin version every processor of an
// application runs, and which processors are paused, shared by every
// process of the fleet. Deploy, rollback (by an operator, or automatically
// by a process), pause and resume publish to it; every process follows it;
// a process that starts later runs what it holds.
//
// The package knows Kafka and nothing of Wasm: a plugin is a byte string
// identified by its SHA-256.
//
// # Topic
//
// One partition, cleanup.policy=compact (EnsureTopic creates it so, and
// refuses an existing topic of another shape). One partition gives a single
// order that every reader sees: a version's chunks come before its
// manifest, and every process applies manifests in the same order.
// Compaction keeps the latest manifest of each processor and, because chunk
// keys are unique per content, the bytes of every version ever published,
// so a rollback always finds the old bytes. Nothing deletes chunks: the
// topic grows by the size of each new content deployed (a rollback, or a
// redeploy of bytes a manifest still references, adds only a manifest).
//
// # Records (format 1)
//
// Chunk: key "chunk/<sha256 hex of the whole module>/<index>", index 0, 1,
// ... in decimal; value the module bytes [index*ChunkSize, (index+1)*ChunkSize).
// ChunkSize is 256 KiB so that a record, and a batch of a few, stays under
// Kafka's default max.message.bytes (1 MiB), which a plugin (~1.8 MB for Go)
// exceeds. A version's chunks are written, and acknowledged, before its
// manifest.
//
// Manifest: key "processor/<name>", value JSON:
//
//	{
//	  "format": 1,
//	  "processor": "<name>",             // equal to the name in the key
//	  "hash": "<sha256 hex>",            // the active version
//	  "size": 1834567,                   // bytes
//	  "chunks": 7,                       // chunk records 0..chunks-1
//	  "label": "v1.4.2",                 // free text from the deployer
//	  "deployed_by": "alice@laptop",     // free text: who or which process
//	  "deployed_at": "2026-05-04T10:00:00.123Z", // RFC 3339, UTC
//	  "reason": "deploy",                // "deploy", "rollback", "initial", or "auto-rollback: <why>"
//	  "history": [ {"hash": ..., "size": ..., "chunks": ..., "label": ...}, ... ]
//	}
//
// history lists the previously active versions, most recent first, at most
// MaxHistory: a deploy pushes the version it replaces, a rollback pops
// history[0] and makes it active. Readers ignore unknown JSON fields, so
// format 1 may gain optional fields; a change old readers would misread
// raises the format number, and a reader refuses a manifest of a format it
// does not know (ErrFormat) rather than guess, and so does a publisher
// asked to replace one.
//
// Pause: key "pause/<name>", value JSON {"format": 1, "processor":
// "<name>", "paused": true|false, "by": ..., "at": ...}: whether the
// processor is paused (`wasmstream pause|resume`); see pause.go.
//
// Member: key "query/<member>", value JSON {"format": 1, "member": ...,
// "address": ..., "tasks": {"<processor>": [partitions]}, "at": ...}:
// a process's interactive-query endpoint and the tasks it holds; see
// member.go.
//
// A reader reassembles a version from the chunks it holds, whatever order
// they came in: Load's State does so when asked, after reading to the end;
// Follow when it reads the manifest, so it reports as missing any chunk that
// comes only after the manifest. Publishers write chunks first, so that
// happens only if compaction removed the first copy of chunks that a racing
// publisher wrote again after a manifest, or if a reader dropped chunks not
// yet referenced because more than a few deploys were in flight at once.
//
// A manifest record with a nil value (tombstone) removes the processor's
// manifest. Records with other keys, or chunk keys that do not parse, are
// ignored: the topic may be written by other tools. A manifest that does not
// decode, or whose bytes are missing or do not hash to its hash, is reported
// (ErrCorrupt) for that processor alone; the others are unaffected.
//
// # Concurrency between publishers
//
// Kafka has no compare-and-set, so publishers can interleave: each reads
// the topic to its end, decides, and writes. A publisher narrows the window
// by reading to the end immediately before writing its manifest (after
// writing any chunks), so its decision rests on a state one produce round
// trip old. Within that window the later manifest wins and the other change
// is lost from the history: a deploy and a rollback racing may leave the
// rollback's result active with the deployed version in no history, and two
// deploys racing leave the second active with the first in no history.
//
// Several processes detecting the same bad version race to roll it back.
// Rollback with expectHash set to the bad version makes every attempt that
// sees another's rollback do nothing (ErrActiveChanged), and attempts that
// read the same state before any rollback landed all compute, and write,
// the same manifest (same active version, same history; deployed_by,
// deployed_at and reason may differ): followers see the same version twice,
// never a second rollback.
package control
