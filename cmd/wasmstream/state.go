package main

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/wasmstream/wasmstream/host"
)

const stateUsage = `usage: wasmstream state dump -c pipeline.yaml --store NAME [--partition N] [--processor P] [--format auto|text|hex] [--limit N]

Prints a store's keys and values and its changelog checkpoint from the local
state directory (state.dir/app_id), without Kafka and without writing to it.
Stop the wasmstream that uses the directory first, or copy the directory and
pass --state-dir.
`

// state runs `wasmstream state SUBCOMMAND`.
func (e *env) state(args []string) int {
	if len(args) == 0 || args[0] != "dump" {
		fmt.Fprint(e.stderr, stateUsage)
		return exitUsage
	}
	return e.stateDump(args[1:])
}

func (e *env) stateDump(args []string) int {
	fs, path, code := e.configFlags("state dump", args, false, func(fs *pflag.FlagSet) {
		fs.String("store", "", "the store to dump (required)")
		fs.String("processor", "", "the processor owning the store (default: the one that declares it)")
		fs.Int32("partition", -1, "only this task's partition; -1: every partition in the state directory")
		fs.String("format", "auto", "keys and values: auto (text if printable, else hex), text (Go-quoted), hex")
		fs.Int("limit", 0, "at most this many keys per partition (0: all)")
	})
	if code != proceed {
		return code
	}
	storeName, _ := fs.GetString("store")
	procName, _ := fs.GetString("processor")
	partition, _ := fs.GetInt32("partition")
	format, _ := fs.GetString("format")
	limit, _ := fs.GetInt("limit")
	if format != "auto" && format != "text" && format != "hex" {
		fmt.Fprintf(e.stderr, "wasmstream state dump: --format %q: want auto, text or hex\n", format)
		return exitUsage
	}
	cfg, ok := e.loadConfig(path, fs)
	if !ok {
		return exitError
	}
	if storeName == "" {
		fmt.Fprintf(e.stderr, "wasmstream state dump: --store is required; %s\n", declaredStores(cfg))
		return exitUsage
	}
	proc, err := storeOwner(cfg, storeName, procName)
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream state dump: %v\n", err)
		return exitError
	}

	dir := cfg.StateDir()
	r, err := host.OpenStateReadOnly(dir, nil)
	switch {
	case errors.Is(err, host.ErrStateInUse):
		fmt.Fprintf(e.stderr, "wasmstream state dump: state dir %s is in use by a running wasmstream; stop it or copy the directory (and pass --state-dir with the copy's parent)\n  (%v)\n", dir, err)
		return exitError
	case errors.Is(err, host.ErrNoState):
		if old := cfg.OldStateDir(); old != "" {
			fmt.Fprintf(e.stderr, "wasmstream state dump: no local state in %s: state.dir (%s) is relative to the config file's directory since this release; "+
				"an earlier wasmstream, which resolved it against the working directory, kept this app's state in %s.\n"+
				"  Read it with --state-dir %s, or move it (mv %s %s) or set state.dir: %s in the config\n",
				dir, cfg.State.Dir, old, filepath.Dir(old), old, dir, filepath.Dir(old))
			return exitError
		}
		fmt.Fprintf(e.stderr, "wasmstream state dump: no local state in %s (state.dir %s, app_id %q): no wasmstream with this config has run on this machine with this state.dir\n  (%v)\n", dir, cfg.State.Dir, cfg.AppID, err)
		return exitError
	case err != nil:
		fmt.Fprintf(e.stderr, "wasmstream state dump: %v\n", err)
		return exitError
	}
	defer r.Close()
	stores, err := r.Stores()
	if err != nil {
		fmt.Fprintf(e.stderr, "wasmstream state dump: %v\n", err)
		return exitError
	}
	var tasks []host.StateStore
	for _, s := range stores {
		if s.Processor == proc.Name && s.Store == storeName && (partition < 0 || s.Partition == partition) {
			tasks = append(tasks, s)
		}
	}

	out := e.stdout
	fmt.Fprintf(out, "state dir %s (opened read-only)\n", dir)
	fmt.Fprintf(out, "store %q of processor %q, changelog %s\n", storeName, proc.Name, cfg.ChangelogTopic(storeName))
	if len(tasks) == 0 {
		which := "any partition"
		if partition >= 0 {
			which = fmt.Sprintf("partition %d", partition)
		}
		fmt.Fprintf(out, "\nno local state for %s: this machine never ran that task, or nothing was written yet\n", which)
		if others := otherTasks(stores, proc.Name, storeName); others != "" {
			fmt.Fprintf(out, "partitions in this directory: %s\n", others)
		}
		return exitOK
	}
	for _, t := range tasks {
		if err := dumpTask(out, r, t, cfg.TaskName(t.Processor, t.Partition), format, limit, cfg.ChangelogTopic(storeName)); err != nil {
			fmt.Fprintf(e.stderr, "wasmstream state dump: %v\n", err)
			return exitError
		}
	}
	return exitOK
}

// dumpTask prints one task's store: its checkpoint, then its keys.
func dumpTask(out io.Writer, r *host.StateReader, t host.StateStore, task, format string, limit int, changelog string) error {
	fmt.Fprintf(out, "\ntask %s\n", task)
	if t.HasCheckpoint {
		fmt.Fprintf(out, "  checkpoint: changelog offset %d (%s partition %d; the store holds every changelog record below it)\n",
			t.Checkpoint, changelog, t.Partition)
	} else {
		fmt.Fprintf(out, "  checkpoint: none (never restored, or wiped: the next start restores from the changelog's beginning)\n")
	}
	tw := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	n, more := 0, false
	errLimit := errors.New("limit")
	err := r.Scan(t.Processor, t.Partition, t.Store, func(k, v []byte) error {
		if limit > 0 && n == limit {
			more = true
			return errLimit
		}
		n++
		fmt.Fprintf(tw, "  %s\t%s\n", formatBytes(k, format, false), formatBytes(v, format, true))
		return nil
	})
	if err != nil && err != errLimit {
		return err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case more:
		fmt.Fprintf(out, "  (first %d keys; --limit 0 shows all)\n", n)
	case n == 1:
		fmt.Fprintf(out, "  (1 key)\n")
	default:
		fmt.Fprintf(out, "  (%d keys)\n", n)
	}
	return nil
}

// formatBytes renders a key or value. auto: printable UTF-8 as is (quoted
// when it has spaces or could be mistaken for hex or a quoted string),
// anything else as 0x-hex, with the big-endian integer reading of an
// 8-byte value (the layout of counters such as wordcount's) when value is
// set. text: Go-quoted. hex: 0x-hex.
func formatBytes(b []byte, format string, value bool) string {
	switch format {
	case "text":
		return strconv.Quote(string(b))
	case "hex":
		return "0x" + hex.EncodeToString(b)
	}
	if printable(b) {
		s := string(b)
		if s == "" || strings.ContainsAny(s, " \"") || strings.HasPrefix(s, "0x") {
			return strconv.Quote(s)
		}
		return s
	}
	h := "0x" + hex.EncodeToString(b)
	if value && len(b) == 8 {
		h += fmt.Sprintf("  (big-endian uint64 %d)", binary.BigEndian.Uint64(b))
	}
	return h
}

func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !strconv.IsPrint(r) {
			return false
		}
	}
	return true
}

// storeOwner finds the processor that declares store, checking processor
// (if given) against the config. Errors list what the config declares.
func storeOwner(cfg *host.Config, store, processor string) (*host.ProcessorConfig, error) {
	var byName *host.ProcessorConfig
	for i := range cfg.Processors {
		if cfg.Processors[i].Name == processor {
			byName = &cfg.Processors[i]
		}
	}
	if processor != "" && byName == nil {
		var names []string
		for _, p := range cfg.Processors {
			desc := "no stores"
			if len(p.Stores) > 0 {
				desc = "stores: " + strings.Join(p.Stores, ", ")
			}
			names = append(names, fmt.Sprintf("%s (%s)", p.Name, desc))
		}
		return nil, fmt.Errorf("unknown processor %q; the config's processors: %s", processor, strings.Join(names, "; "))
	}
	for i := range cfg.Processors {
		p := &cfg.Processors[i]
		for _, s := range p.Stores {
			if s != store {
				continue
			}
			if byName != nil && byName != p {
				return nil, fmt.Errorf("store %q belongs to processor %q, not %q", store, p.Name, processor)
			}
			return p, nil
		}
	}
	if byName != nil {
		if len(byName.Stores) == 0 {
			return nil, fmt.Errorf("processor %q declares no stores", processor)
		}
		return nil, fmt.Errorf("processor %q has no store %q; its stores: %s", processor, store, strings.Join(byName.Stores, ", "))
	}
	return nil, fmt.Errorf("unknown store %q; %s", store, declaredStores(cfg))
}

// declaredStores describes the stores a config declares.
func declaredStores(cfg *host.Config) string {
	var s []string
	for _, p := range cfg.Processors {
		for _, st := range p.Stores {
			s = append(s, fmt.Sprintf("%s (processor %s)", st, p.Name))
		}
	}
	if len(s) == 0 {
		return "the config declares no stores (processors[].stores)"
	}
	sort.Strings(s)
	return "the config declares: " + strings.Join(s, ", ")
}

// otherTasks lists the partitions of a store present in the directory.
func otherTasks(stores []host.StateStore, processor, store string) string {
	var parts []string
	for _, s := range stores {
		if s.Processor == processor && s.Store == store {
			parts = append(parts, strconv.Itoa(int(s.Partition)))
		}
	}
	return strings.Join(parts, ", ")
}
