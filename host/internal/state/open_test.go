package state

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenDirUnusable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(file, "state"), Options{})
	if !errors.Is(err, ErrDirUnusable) {
		t.Fatalf("state dir under a regular file: %v, want ErrDirUnusable", err)
	}
	t.Log(err)

	if os.Geteuid() == 0 {
		t.Skip("running as root: directory permissions do not stop root, cannot test a read-only state dir")
	}
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ro, Options{}); !errors.Is(err, ErrDirUnusable) || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("read-only dir: %v", err)
	}
}

func TestOpenLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "this process") {
		t.Fatalf("second Open in the same process: %v, want ErrLocked naming this process", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	db.Close()
}

// envHoldLock makes the test binary, re-executed by TestOpenLockedByOtherProcess,
// open the DB in the named directory and hold it until stdin closes.
const envHoldLock = "WASMSTREAM_STATE_TEST_HOLD_LOCK"

func TestOpenLockedByOtherProcess(t *testing.T) {
	if dir := os.Getenv(envHoldLock); dir != "" {
		db, err := Open(dir, Options{})
		if err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("locked\n")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
		db.Close()
		os.Exit(0)
	}

	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenLockedByOtherProcess$")
	cmd.Env = append(os.Environ(), envHoldLock+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Error("lock holder did not exit")
		}
	}()
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "locked\n" {
			t.Fatalf("lock holder: %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lock holder did not open the DB within 30s")
	}

	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("Open while another process holds the DB: %v, want ErrLocked naming another process", err)
	}
	t.Log(err)
}

func TestOpenCorrupt(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tk := db.Task("p", 0, []string{"s"})
	if err := tk.ApplyRestored(0, []Change{{Key: []byte("k"), Value: []byte("v")}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("no MANIFEST file to damage")
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte(strings.Repeat("garbage ", 64)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged MANIFEST: %v, want ErrCorrupt", err)
	}
	t.Log(err)
}

func TestOpenWrongLayout(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.pdb.Set(formatKey, []byte{99}, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "layout") {
		t.Fatalf("unknown layout: %v", err)
	}
}
