package abitest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/wasmstream/wasmstream/abi"
)

// Batches are the shared vectors of ABI.md section 10 (version 2), from
// testdata/batches.json: whole batches as the host writes them into the
// input buffer, and runs of emit entries as a plugin stages them. The
// records and triggers they hold are the vectors of records.json and
// triggers.json, by name.
type Batches struct {
	Batches []BatchVector
	Emits   []EmitsVector
	// MalformedEmits are runs of emit entries abi.NextEmitEntry must
	// reject, by name.
	MalformedEmits map[string][]byte
}

// BatchVector is a batch and its encoding (the plugin's fields all 0).
type BatchVector struct {
	Name    string
	Slots   []BatchSlot
	Encoded []byte
}

// BatchSlot is one call of a batch: a record, or a trigger.
type BatchSlot struct {
	Kind    uint32 // abi.SlotRecord or abi.SlotTrigger
	Record  *abi.Record
	Trigger *abi.Trigger
	// Payload is the record's or the trigger's encoding.
	Payload []byte
}

// EmitsVector is a list of emitted records and their run of emit entries.
type EmitsVector struct {
	Name    string
	Records []abi.Record
	Encoded []byte
}

type batchesFile struct {
	Batches []struct {
		Name  string `json:"name"`
		Slots []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"slots"`
		Encoded string `json:"encoded"`
	} `json:"batches"`
	Emits []struct {
		Name    string   `json:"name"`
		Records []string `json:"records"`
		Encoded string   `json:"encoded"`
	} `json:"emits"`
	MalformedEmits []struct {
		Name    string `json:"name"`
		Encoded string `json:"encoded"`
	} `json:"malformed_emits"`
}

// BatchesPath is the location of the batch vector file in this repository.
func BatchesPath() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "testdata", "batches.json")
}

// LoadBatches reads the batch vectors of this repository, resolving the
// records and triggers they name from records.json and triggers.json.
func LoadBatches() (*Batches, error) {
	return LoadBatchesFrom(BatchesPath(), Path(), TriggersPath())
}

// LoadBatchesFrom reads the batch vectors at path with the record and
// trigger vectors at recordsPath and triggersPath.
func LoadBatchesFrom(path, recordsPath, triggersPath string) (*Batches, error) {
	recs, _, err := Load(recordsPath)
	if err != nil {
		return nil, err
	}
	trigs, err := LoadTriggers(triggersPath)
	if err != nil {
		return nil, err
	}
	recByName := map[string]Vector{}
	for _, v := range recs {
		recByName[v.Name] = v
	}
	trigByName := map[string]TriggerVector{}
	for _, v := range trigs.Vectors {
		trigByName[v.Name] = v
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f batchesFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := &Batches{MalformedEmits: map[string][]byte{}}
	for _, b := range f.Batches {
		enc, err := hex.DecodeString(b.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: batch %q: %w", path, b.Name, err)
		}
		bv := BatchVector{Name: b.Name, Encoded: enc}
		for _, s := range b.Slots {
			switch s.Kind {
			case "record":
				v, ok := recByName[s.Name]
				if !ok {
					return nil, fmt.Errorf("%s: batch %q: no record vector %q", path, b.Name, s.Name)
				}
				r := v.Record
				bv.Slots = append(bv.Slots, BatchSlot{Kind: abi.SlotRecord, Record: &r, Payload: v.Encoded})
			case "trigger":
				v, ok := trigByName[s.Name]
				if !ok {
					return nil, fmt.Errorf("%s: batch %q: no trigger vector %q", path, b.Name, s.Name)
				}
				tr := v.Trigger
				bv.Slots = append(bv.Slots, BatchSlot{Kind: abi.SlotTrigger, Trigger: &tr, Payload: v.Encoded})
			default:
				return nil, fmt.Errorf("%s: batch %q: slot kind %q", path, b.Name, s.Kind)
			}
		}
		out.Batches = append(out.Batches, bv)
	}
	for _, e := range f.Emits {
		enc, err := hex.DecodeString(e.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: emits %q: %w", path, e.Name, err)
		}
		ev := EmitsVector{Name: e.Name, Encoded: enc}
		for _, n := range e.Records {
			v, ok := recByName[n]
			if !ok {
				return nil, fmt.Errorf("%s: emits %q: no record vector %q", path, e.Name, n)
			}
			ev.Records = append(ev.Records, v.Record)
		}
		out.Emits = append(out.Emits, ev)
	}
	for _, m := range f.MalformedEmits {
		enc, err := hex.DecodeString(m.Encoded)
		if err != nil {
			return nil, fmt.Errorf("%s: malformed emits %q: %w", path, m.Name, err)
		}
		out.MalformedEmits[m.Name] = enc
	}
	return out, nil
}
