// Command configdoc writes docs/config.md from host.Config's doc comments:
// go run ./internal/configdoc/cmd/configdoc -host host -o docs/config.md
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/wasmstream/wasmstream/internal/configdoc"
)

func main() {
	hostDir := flag.String("host", "host", "the host package's directory")
	out := flag.String("o", "docs/config.md", "the file to write")
	flag.Parse()
	doc, err := configdoc.Generate(*hostDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}
