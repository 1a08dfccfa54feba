// Package admin is the host's admin HTTP endpoint: health, readiness,
// Prometheus metrics and a description of the running processors.
//
//	GET /healthz         200 "ok", or 503 and the reason (a stopped task, a stopped runner)
//	GET /readyz          200 "ok" once every assigned task is restored and no state database has failed,
//	                     else 503 and the reason ("restoring N tasks", the failed database's error)
//	GET /metrics         Prometheus text format 0.0.4
//	GET /v1/processors   JSON: each processor, its plugin versions and its counters
//	GET /v1/processors/{name}/shadow
//	                     JSON: the processor's latest shadow run here and the differences it kept,
//	                     without record contents (shadow.go)
//	GET /debug/...       with Debug only: Go's profiler and a snapshot of what the process holds (debug.go)
//
// Every endpoint is read-only (HEAD is served like GET; other methods get
// 405). The package knows neither the runner nor the engine: it reads
// everything through a Source, which the host implements.
package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Server is a running admin endpoint.
type Server struct {
	src   Source
	debug bool // the /debug/ routes are served
	log   *slog.Logger
	ln    net.Listener
	srv   *http.Server
	done  chan struct{} // closed when Serve returned

	closeOnce sync.Once
	closeErr  error
	badExtra  sync.Map // extra family name -> logged

	connMu sync.Mutex
	fresh  map[net.Conn]struct{} // connections that have not sent a request yet
}

// DefaultHost is the host the endpoint binds when the listen address
// names none (":9090"): loopback, never every interface by accident.
const DefaultHost = "127.0.0.1"

// ListenAddress checks a listen address (admin.listen) and returns the
// address to bind: host:port, with DefaultHost when the host is empty. The
// port must be a number (0 picks a free port).
func ListenAddress(listen string) (string, error) {
	if listen == "" {
		return "", errors.New("admin.listen is empty (the admin endpoint is off)")
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("admin.listen %q is not host:port (example: 127.0.0.1:9090)", listen)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("admin.listen %q: port %q is not a number from 0 to 65535", listen, port)
	}
	if host == "" {
		host = DefaultHost
	}
	return net.JoinHostPort(host, port), nil
}

// Option changes how New makes a Server.
type Option func(*Server)

// Debug serves the debug endpoints too (debug.go): Go's net/http/pprof
// and /debug/snapshot. Off by default (admin.debug).
func Debug() Option { return func(s *Server) { s.debug = true } }

// debugWriteTimeout is how long a response may take to write when the
// debug endpoints are on: a CPU profile or an execution trace lasts the
// seconds it is asked for (pprof refuses one longer than this).
const debugWriteTimeout = 2 * time.Minute

// New binds listen (see ListenAddress) and serves the admin endpoint from
// src until Close. It fails, saying so, when the address is taken. A nil
// logger is slog.Default().
func New(listen string, src Source, logger *slog.Logger, opts ...Option) (*Server, error) {
	if src == nil {
		return nil, errors.New("admin: nil Source")
	}
	if logger == nil {
		logger = slog.Default()
	}
	addr, err := ListenAddress(listen)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("admin.listen %s: the address is already in use (another wasmstream, or another program, listens there); choose a free port with admin.listen or --admin-listen: %w", addr, err)
		}
		return nil, fmt.Errorf("admin.listen %s: cannot listen: %w", addr, err)
	}
	s := &Server{src: src, log: logger, ln: ln, done: make(chan struct{}), fresh: map[net.Conn]struct{}{}}
	for _, o := range opts {
		o(s)
	}
	writeTimeout := 30 * time.Second
	if s.debug {
		writeTimeout = debugWriteTimeout
	}
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ConnState:         s.connState,
	}
	s.srv.RegisterOnShutdown(s.closeFresh)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("admin endpoint stopped serving", "addr", s.Addr(), "err", err)
		}
	}()
	logger.Info("admin endpoint listening", "addr", s.Addr(), "debug", s.debug)
	return s, nil
}

// Addr is the address the endpoint listens on (with the real port when
// the configured one was 0).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the endpoint: it stops accepting, lets requests in flight
// finish until ctx is done, then drops them. It may be called more than
// once; later calls return the first call's result.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		err := s.srv.Shutdown(ctx)
		if err != nil {
			_ = s.srv.Close()
		}
		<-s.done
		if err != nil {
			s.closeErr = fmt.Errorf("admin: shutdown: %w", err)
		}
	})
	return s.closeErr
}

// connState tracks the connections that have not sent a request yet.
// Shutdown waits for a request on them for up to 5 s (net/http's rule for
// new connections), which a client's spare keep-alive dial, or a port
// check, never sends; closeFresh closes them at once instead.
func (s *Server) connState(c net.Conn, st http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if st == http.StateNew {
		s.fresh[c] = struct{}{}
	} else {
		delete(s.fresh, c)
	}
}

func (s *Server) closeFresh() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
		delete(s.fresh, c)
	}
}

// Handler returns the endpoint's routes.
//
// Hook for mutating routes (none yet): register each one wrapped in
// RequireToken, with the token from the config (a future admin.token),
//
//	mux.Handle("POST /v1/processors/{name}/swap", RequireToken(token, http.HandlerFunc(s.swap)))
//
// so that with no token configured they are refused, never open.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	// "GET" patterns also match HEAD; the mux answers other methods with
	// 405 and an Allow header, and unknown paths with 404.
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /v1/processors", s.processors)
	mux.HandleFunc("GET /v1/processors/{name}/shadow", s.shadow)
	if s.debug {
		s.registerDebug(mux)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	ok, reason := s.src.Health()
	status(w, ok, reason)
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	ok, reason := s.src.Ready()
	status(w, ok, reason)
}

// status answers a probe: 200 "ok" or 503 and the reason.
func status(w http.ResponseWriter, ok bool, reason string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ok {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	if reason == "" {
		reason = "unavailable"
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(reason + "\n"))
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	fams := buildFamilies(s.src.Metrics(), s.src.Processors(), func(name, reason string) {
		if _, logged := s.badExtra.LoadOrStore(name, true); !logged {
			s.log.Warn("admin: a metric family is not exported", "family", name, "reason", reason)
		}
	})
	var buf bytes.Buffer
	writeText(&buf, fams)
	if err := writeRuntime(&buf); err != nil {
		s.log.Warn("admin: runtime metrics not exported", "err", err)
	}
	w.Header().Set("Content-Type", metricsContentType)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	_, _ = w.Write(buf.Bytes())
}

// The /v1/processors document. Its shape is an API: fields are added,
// never renamed or removed, within v1.
type processorsDoc struct {
	Processors []processorDoc `json:"processors"`
}

type processorDoc struct {
	Name    string            `json:"name"`
	Inputs  []string          `json:"inputs"`
	Outputs map[string]string `json:"outputs"`
	Stores  []string          `json:"stores"`
	OnError string            `json:"on_error"`
	// Paused: paused by `wasmstream pause`, and applied by this process
	// (at its tasks' next commit point after the control topic said so).
	Paused   bool        `json:"paused"`
	Plugin   pluginDoc   `json:"plugin"`
	Counters countersDoc `json:"counters"`
	// ActiveVersion is the version new tasks start with (the same module
	// as plugin); Tasks the version each assigned task runs (they differ
	// during a swap); Refused the latest versions this process refused.
	ActiveVersion versionDoc   `json:"active_version"`
	Tasks         []taskDoc    `json:"tasks"`
	Refused       []refusalDoc `json:"refused"`
}

type versionDoc struct {
	ID     string `json:"id"`
	SHA256 string `json:"sha256"`
	Label  string `json:"label"`
}

type taskDoc struct {
	Task    string `json:"task"`
	Version string `json:"version"`
}

type refusalDoc struct {
	versionDoc
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

type pluginDoc struct {
	Path       string `json:"path"`
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	ABIVersion int    `json:"abi_version"`
	Version    string `json:"version,omitempty"`
}

type countersDoc struct {
	RecordsIn    int64            `json:"records_in"`
	RecordsOut   int64            `json:"records_out"`
	Skipped      int64            `json:"skipped"`
	DeadLettered int64            `json:"dead_lettered"`
	FailedTasks  int64            `json:"failed_tasks"`
	Commits      int64            `json:"commits"`
	Aborts       int64            `json:"aborts"`
	Failures     map[string]int64 `json:"failures"`
	Swaps        int64            `json:"swaps"`
	SwapFailures int64            `json:"swap_failures"`
	Rollbacks    int64            `json:"rollbacks"`
	Refusals     int64            `json:"refusals"`
	// The records shadow runs compared, and the shadows that stopped
	// themselves (host/internal/runner/shadow.go).
	ShadowMatches     int64 `json:"shadow_matches"`
	ShadowDifferences int64 `json:"shadow_differences"`
	ShadowFailures    int64 `json:"shadow_failures"`
	ShadowStops       int64 `json:"shadow_stops"`
}

func (s *Server) processors(w http.ResponseWriter, _ *http.Request) {
	procs := s.src.Processors()
	byName := map[string]ProcessorMetrics{}
	for _, m := range s.src.Metrics().Processors {
		byName[m.Name] = m
	}
	doc := processorsDoc{Processors: make([]processorDoc, 0, len(procs))}
	for _, p := range procs {
		m := byName[p.Name]
		lc := m.Lifecycle
		if lc == nil {
			lc = &Lifecycle{}
		}
		d := processorDoc{
			Name:    p.Name,
			Inputs:  orEmpty(p.Inputs),
			Outputs: orEmptyMap(p.Outputs),
			Stores:  orEmpty(p.Stores),
			OnError: p.OnError,
			Paused:  p.Paused,
			Plugin: pluginDoc{
				Path:       p.Plugin.Path,
				SHA256:     p.Plugin.SHA256,
				Size:       p.Plugin.Size,
				ABIVersion: p.Plugin.ABIVersion,
				Version:    p.Plugin.Version,
			},
			Counters: countersDoc{
				RecordsIn:    m.RecordsIn,
				RecordsOut:   m.RecordsOut,
				Skipped:      m.Skipped,
				DeadLettered: m.DeadLettered,
				FailedTasks:  m.FailedTasks,
				Commits:      m.Commits,
				Aborts:       m.Aborts,
				Failures:     orEmptyMap(m.Failures),
				Swaps:        lc.Swaps,
				SwapFailures: lc.SwapFailures,
				Rollbacks:    lc.Rollbacks,
				Refusals:     lc.Refusals,

				ShadowMatches:     lc.ShadowMatches,
				ShadowDifferences: lc.ShadowDifferences,
				ShadowFailures:    lc.ShadowFailures,
				ShadowStops:       lc.ShadowStops,
			},
			ActiveVersion: versionDoc{ID: p.Plugin.Version, SHA256: p.Plugin.SHA256, Label: p.Plugin.Label},
			Tasks:         make([]taskDoc, 0, len(lc.Tasks)),
			Refused:       make([]refusalDoc, 0, len(lc.Refused)),
		}
		for _, t := range lc.Tasks {
			//lint:ignore S1016 the JSON document's fields are spelled out: a field added to TaskVersion must not reach /v1 by itself
			d.Tasks = append(d.Tasks, taskDoc{Task: t.Task, Version: t.Version})
		}
		for _, r := range lc.Refused {
			d.Refused = append(d.Refused, refusalDoc{
				versionDoc: versionDoc{ID: r.Version, SHA256: r.SHA256, Label: r.Label},
				Reason:     r.Reason, At: r.At,
			})
		}
		doc.Processors = append(doc.Processors, d)
	}
	writeJSON(w, doc)
}

// writeJSON answers with v, indented. v is plain structs of strings and
// numbers, which always encode.
func writeJSON(w http.ResponseWriter, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(append(body, '\n'))
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func orEmptyMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}
