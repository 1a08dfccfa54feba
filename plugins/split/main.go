// Command split is a wasmstream plugin that re-keys text by its words: it
// splits each record's value into words (the rules of plugins/wordcount)
// and emits one record per word, in order, keyed by the word, to the
// output "words". Declared as a repartition output, that output brings
// every occurrence of a word to one task of the next processor, so a
// plugins/wordcount reading it counts correctly whatever partition a line
// arrived on. It takes no config.
package main

import (
	"github.com/wasmstream/wasmstream/plugins/internal/noconfig"
	"github.com/wasmstream/wasmstream/plugins/internal/words"
	"github.com/wasmstream/wasmstream/sdk"
)

var out = sdk.Output("words")

func init() {
	sdk.OnInit(setup)
	sdk.Handle(process)
}

func setup() error { return noconfig.Setup("split", out) }

// Per-record scratch, reused: the words one after another and their ends.
var (
	text []byte
	ends []int
)

func process(r *sdk.Record) error {
	text, ends = words.Split(text[:0], ends[:0], r.Value)
	start := 0
	for _, end := range ends {
		w := text[start:end]
		// The word is key and value: a word count downstream splits the
		// value into the same single word.
		if err := out.Emit(sdk.Out{Key: w, Value: w}); err != nil {
			return err
		}
		start = end
	}
	return nil
}

func main() {}
