package control

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// Format is the manifest format this package writes and the only one
	// it reads.
	Format = 1
	// ChunkSize is the size in bytes of every chunk but a module's last.
	ChunkSize = 256 << 10
	// MaxHistory bounds a manifest's history (previous versions kept for
	// rollback).
	MaxHistory = 16
	// maxChunks bounds the chunk count a manifest may claim (1 GiB of
	// module at ChunkSize), so a garbage manifest cannot make a reader
	// allocate without bound.
	maxChunks = 4096
)

// Reasons a manifest records. An automatic rollback's reason is
// AutoRollback(why).
const (
	ReasonDeploy   = "deploy"
	ReasonRollback = "rollback"
	ReasonInitial  = "initial"
)

// AutoRollback returns the reason of a rollback a process made by itself.
func AutoRollback(why string) string { return "auto-rollback: " + why }

// Key prefixes of the two record kinds; other keys are ignored.
const (
	chunkPrefix    = "chunk/"
	manifestPrefix = "processor/"
)

// Errors, for errors.Is. Every error also names the topic and what it
// concerns (processor, key, offset, hash).
var (
	// ErrAlreadyActive: Deploy of the content that is already active.
	ErrAlreadyActive = errors.New("control: version already active")
	// ErrActiveChanged: Rollback with an expectHash that is no longer the
	// active version (another process rolled back or deployed first).
	ErrActiveChanged = errors.New("control: active version changed")
	// ErrNoPrevious: Rollback of a processor whose history is empty.
	ErrNoPrevious = errors.New("control: no previous version")
	// ErrNoManifest: the processor has no manifest in the topic.
	ErrNoManifest = errors.New("control: no manifest")
	// ErrCorrupt: a manifest does not decode, or a version's bytes are
	// missing or do not match its hash and size. The version cannot run.
	ErrCorrupt = errors.New("control: corrupt")
	// ErrFormat: a manifest of a format this build does not know (written
	// by a newer wasmstream). It is neither run nor overwritten.
	ErrFormat = errors.New("control: unsupported manifest format")
	// ErrTopicShape: the control topic exists with a partition count or
	// cleanup policy it must not have.
	ErrTopicShape = errors.New("control: control topic misconfigured")
)

// TopicName returns the control topic of an application.
func TopicName(appID string) string { return appID + "-plugins" }

// Version identifies one module: its content hash, and what is needed to
// reassemble it from the topic.
type Version struct {
	Hash   string `json:"hash"`   // sha256 of the module, lowercase hex
	Size   int64  `json:"size"`   // bytes
	Chunks int    `json:"chunks"` // chunk records 0..Chunks-1
	Label  string `json:"label"`  // free text given at deploy
}

// Manifest is a processor's record: the active version and its history.
type Manifest struct {
	Format    int    `json:"format"`
	Processor string `json:"processor"`
	Version          // the active version, flattened into the JSON object
	// DeployedBy and DeployedAt say who published this manifest and when
	// (for a rollback, who rolled back, not who built the version).
	DeployedBy string    `json:"deployed_by"`
	DeployedAt time.Time `json:"deployed_at"`
	// Reason is ReasonDeploy, ReasonRollback, ReasonInitial or
	// AutoRollback(why).
	Reason string `json:"reason"`
	// History: previously active versions, most recent first, at most
	// MaxHistory. Never nil in a written manifest.
	History []Version `json:"history"`

	// Offset of the manifest record in the topic (not part of the JSON);
	// -1 for a manifest not read from or written to the topic.
	Offset int64 `json:"-"`
	// Skipped lists the previous versions a Rollback passed over because
	// they could not run (not part of the JSON; only on Rollback's result).
	Skipped []SkippedVersion `json:"-"`
}

// NewVersion returns the Version of module: its hash, size and chunk count.
func NewVersion(module []byte, label string) Version {
	sum := sha256.Sum256(module)
	return Version{
		Hash:   hex.EncodeToString(sum[:]),
		Size:   int64(len(module)),
		Chunks: (len(module) + ChunkSize - 1) / ChunkSize,
		Label:  label,
	}
}

// Short returns the first 12 hex digits of the hash, for messages.
func (v Version) Short() string {
	if len(v.Hash) > 12 {
		return v.Hash[:12]
	}
	return v.Hash
}

func (v Version) String() string {
	if v.Label == "" {
		return v.Short()
	}
	return fmt.Sprintf("%s (%s)", v.Short(), v.Label)
}

func chunkKey(hash string, index int) string {
	return chunkPrefix + hash + "/" + strconv.Itoa(index)
}

func manifestKey(processor string) string { return manifestPrefix + processor }

// parseChunkKey returns the hash and index of a chunk key; ok is false for
// a key that is not one (wrong prefix, hash not 64 lowercase hex digits,
// index not a decimal below maxChunks).
func parseChunkKey(key string) (hash string, index int, ok bool) {
	rest, found := strings.CutPrefix(key, chunkPrefix)
	if !found {
		return "", 0, false
	}
	hash, idx, found := strings.Cut(rest, "/")
	if !found || !validHash(hash) {
		return "", 0, false
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || n >= maxChunks || strconv.Itoa(n) != idx {
		return "", 0, false
	}
	return hash, n, true
}

func validHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// chunk returns chunk i of module.
func chunk(module []byte, i int) []byte {
	return module[i*ChunkSize : min((i+1)*ChunkSize, len(module))]
}

// encodeManifest returns the JSON value of m (History written as [] when
// empty).
func encodeManifest(m Manifest) []byte {
	if m.History == nil {
		m.History = []Version{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic("control: encoding a manifest: " + err.Error()) // only plain types: cannot happen
	}
	return b
}

// decodeManifest decodes and checks the value of the manifest record for
// processor. The error says what is wrong; the caller adds the topic, key
// and offset. It wraps ErrFormat for a format other than Format, ErrCorrupt
// for anything else.
func decodeManifest(processor string, value []byte) (Manifest, error) {
	var m Manifest
	// Read the format first, alone, so that a manifest of another format
	// is reported as such even if the rest would not decode as format 1.
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(value, &head); err != nil {
		return m, fmt.Errorf("%w: not a JSON object: %v", ErrCorrupt, err)
	}
	if head.Format == nil {
		return m, fmt.Errorf("%w: no format field", ErrCorrupt)
	}
	if *head.Format != Format {
		return m, fmt.Errorf("%w: format %d (this build reads format %d; upgrade wasmstream)", ErrFormat, *head.Format, Format)
	}
	if err := json.Unmarshal(value, &m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if m.Processor != processor {
		return Manifest{}, fmt.Errorf("%w: processor field %q differs from the key's %q", ErrCorrupt, m.Processor, processor)
	}
	if err := m.Version.check(); err != nil {
		return Manifest{}, fmt.Errorf("%w: active version: %v", ErrCorrupt, err)
	}
	for i, v := range m.History {
		if err := v.check(); err != nil {
			return Manifest{}, fmt.Errorf("%w: history[%d]: %v", ErrCorrupt, i, err)
		}
	}
	m.Offset = -1
	return m, nil
}

// check reports a version no module could have.
func (v Version) check() error {
	switch {
	case !validHash(v.Hash):
		return fmt.Errorf("hash %q is not 64 lowercase hex digits", v.Hash)
	case v.Size <= 0:
		return fmt.Errorf("size %d", v.Size)
	case v.Chunks <= 0 || v.Chunks > maxChunks:
		return fmt.Errorf("chunks %d (want 1 to %d)", v.Chunks, maxChunks)
	case int64(v.Chunks) > v.Size:
		return fmt.Errorf("%d chunks for %d bytes", v.Chunks, v.Size)
	}
	return nil
}

// assemble concatenates chunks 0..v.Chunks-1 of v from parts and verifies
// the size and hash. The error wraps ErrCorrupt and says what is missing or
// wrong.
func assemble(v Version, parts map[int][]byte) ([]byte, error) {
	var missing []int
	var size int64
	for i := 0; i < v.Chunks; i++ {
		p, ok := parts[i]
		if !ok {
			missing = append(missing, i)
		}
		size += int64(len(p))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: version %s: %d of %d chunks missing (%s)", ErrCorrupt, v, len(missing), v.Chunks, listInts(missing, 5))
	}
	if size != v.Size {
		return nil, fmt.Errorf("%w: version %s: chunks hold %d bytes, manifest says %d", ErrCorrupt, v, size, v.Size)
	}
	out := make([]byte, 0, size)
	for i := 0; i < v.Chunks; i++ {
		out = append(out, parts[i]...)
	}
	if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != v.Hash {
		return nil, fmt.Errorf("%w: version %s: bytes hash to %x, not to the manifest's hash", ErrCorrupt, v, sum[:6])
	}
	return out, nil
}

// listInts formats up to max numbers ("1, 4, 7, ...").
func listInts(xs []int, max int) string {
	var sb strings.Builder
	for i, x := range xs {
		if i == max {
			sb.WriteString(", ...")
			break
		}
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(x))
	}
	return sb.String()
}
