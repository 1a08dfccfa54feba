package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// boundary is what the non-test files of one host package may not import.
type boundary struct {
	pkg    string   // module-relative package
	forbid []string // import paths; "x/..." forbids the tree; module-relative for the module's own
	// closure also checks every package of the module the package depends
	// on, so the forbidden code cannot come in through another one either.
	closure bool
	why     string
}

const (
	franz  = "github.com/twmb/franz-go/..."
	pebble = "github.com/cockroachdb/pebble/v2/..."
	wazero = "github.com/tetratelabs/wazero/..."
)

var boundaries = []boundary{
	{pkg: "host/internal/engine", forbid: []string{franz, pebble, "host/internal/runner", "host/internal/state"}, closure: true,
		why: "the engine runs Wasm and knows neither Kafka nor the store: a plugin reaches both only through the host's interfaces (I6)"},
	{pkg: "host/internal/state", forbid: []string{wazero, franz, "host/internal/engine"}, closure: true,
		why: "the state store knows nothing of plugins or Kafka: its checkpoint is its own (I3)"},
	{pkg: "host/internal/account", forbid: []string{wazero, franz, pebble, "host/internal/engine", "host/internal/state", "host/internal/runner", "host/internal/plugin"}, closure: true,
		why: "the account of what the host holds for plugins is a leaf: the runner charges and releases it, and the store only reports what its writes hold"},
	{pkg: "host/internal/versions", forbid: []string{franz, pebble, wazero, "host/..."}, closure: true,
		why: "the version registry is a leaf every side reads: it holds records, not Kafka, Wasm or state"},
	{pkg: "host/internal/kclient", forbid: []string{pebble, wazero, "host/..."}, closure: true,
		why: "the Kafka client builder is a leaf: every package that makes a client imports it"},
	{pkg: "host/internal/copartition", forbid: []string{pebble, wazero, "host/..."}, closure: true,
		why: "the co-partitioning balancer is a leaf: it plans from the group members' metadata alone, so any leader plans alike"},
	{pkg: "host/internal/topics", forbid: []string{pebble, wazero, "host/internal/runner", "host/internal/engine", "host/internal/state"}, closure: true,
		why: "topic creation is admin requests only"},
	{pkg: "host/internal/globaltable", forbid: []string{wazero, "host/internal/engine", "host/internal/runner", "host/internal/plugin"}, closure: true,
		why: "a global table is a consumer feeding a state.Table: it knows no Wasm and no plugin"},
	{pkg: "host/internal/plugin", forbid: []string{franz, pebble},
		why: "a plugin's runtime and adapters know no Kafka and no Pebble; the runner and state own those"},
	{pkg: "host/internal/follower", forbid: []string{pebble, wazero, "host/internal/engine", "host/internal/state"},
		why: "the follower compiles through package plugin and swaps through the registry, nothing lower"},
	{pkg: "host/internal/signature", forbid: []string{franz, pebble, wazero, "host/..."}, closure: true,
		why: "signing and verifying is the standard library's crypto over a module's bytes: no Kafka, no Wasm engine"},
	{pkg: "host/internal/replay", forbid: []string{franz, pebble},
		why: "replay runs a plugin over records it is given: the host reads them from Kafka, and its state is in memory"},
	{pkg: "host/internal/reset", forbid: []string{pebble, wazero, "host/..."}, closure: true,
		why: "reset knows the app as topic and group names; the host package makes them from the config"},
	{pkg: "host/internal/shadow", forbid: []string{franz, pebble, wazero, "host/..."}, closure: true,
		why: "a shadow run's report is a leaf: the runner fills it in, the deployer reads it from the diff topic"},
	{pkg: "host/internal/deploy", forbid: []string{pebble, wazero, "host/internal/engine", "host/internal/state", "host/internal/runner"},
		why: "a deploy publishes to the control topic; it compiles through package plugin and never runs a task"},
	{pkg: "host/internal/topictool", forbid: []string{pebble, wazero, "host/internal/engine", "host/internal/state", "host/internal/runner", "host/internal/plugin"}, closure: true,
		why: "the topic commands are Kafka clients only: they run no plugin and read no state"},
	{pkg: "host/internal/status", forbid: []string{franz, pebble, wazero},
		why: "the admin view reads the runner's counters and the registry, never Kafka, Wasm or the store directly"},
	{pkg: "host", forbid: []string{pebble, wazero},
		why: "the public host package is a thin face over host/internal: Wasm and the store are reached through it"},
	{pkg: "host", forbid: []string{"github.com/knadh/koanf/...", "github.com/spf13/pflag", "github.com/go-viper/mapstructure/..."}, closure: true,
		why: "the host takes a Config: reading one from a file, the environment and flags is internal/configload's (the CLI's), not the embedding API's"},
}

func TestHostBoundaries(t *testing.T) {
	for _, b := range boundaries {
		forbid := make([]string, len(b.forbid))
		for i, f := range b.forbid {
			if strings.HasPrefix(f, "host") {
				f = module + "/" + f
			}
			forbid[i] = f
		}
		target := module + "/" + b.pkg
		pkgs := list(t, nil, target)
		p := pkgs[target]
		if p == nil || len(p.GoFiles) == 0 {
			t.Errorf("%s: no such package: the rule is stale", b.pkg)
			continue
		}
		consult(p)
		// The package's direct imports, or everything it depends on.
		check := []*pkg{p}
		if b.closure {
			check = check[:0]
			for path, q := range pkgs {
				if strings.HasPrefix(path, module+"/") {
					consult(q)
					check = append(check, q)
				}
			}
		}
		for _, q := range check {
			for _, imp := range q.Imports {
				if matches(imp, forbid) && imp != target && !strings.HasPrefix(imp, target+"/") {
					t.Errorf("%s depends on %s (imported by %s): %s", b.pkg, imp, where(q, imp), b.why)
				}
			}
		}
	}
}

// thinFace is every identifier the public host package exports: the
// config, New/Run/Close and the host's methods, Deploy, Rollback, Pause and Resume, the
// options, and snapshot types with fields of their own (docs/design.md
// section 2). Anything else belongs under host/internal.
var thinFace = []string{
	// config
	"Config", "KafkaConfig", "TLSConfig", "SASLConfig", "Secret", "ProcessorConfig", "Limits", "StoreExpiry", "ModuleLimits", "StateConfig", "RuntimeConfig", "SwapConfig",
	"AdminConfig", "QueryConfig", "LogConfig", "ByteSize", "ConfigError", "OutputConfig", "CacheSize",
	// the config's choices: types that parse themselves, and their values;
	// Optional (with Set) for settings whose zero means something
	"Guarantee", "ExactlyOnce", "AtLeastOnce", "ErrorPolicy", "OnErrorFail", "OnErrorSkip", "OnErrorDeadLetter",
	"StartOffset", "StartEarliest", "StartLatest", "GroupProtocol", "ProtocolAuto", "ProtocolConsumer", "ProtocolClassic",
	"Members", "MembersPerProcessor", "MembersShared", "LogLevel", "LevelDebug", "LevelInfo", "LevelWarn", "LevelError",
	"LogFormat", "LogText", "LogJSON", "ExpiryClock", "ClockEvent", "ClockWall", "OutputEmit", "EmitEach", "EmitLatestPerKey",
	"Optional", "Set",
	"DefaultClientID", "DefaultCommitInterval", "DefaultCommitRecords", "DefaultTopicPartitions",
	"DefaultSessionTimeout", "DefaultMaxModuleSize", "DefaultCanaryWindow", "DefaultMaxFailureRatio",
	"DefaultTransactionTimeout", "DefaultConnectTimeout", "DefaultMemory", "DefaultRecordTimeout", "DefaultStateDir",
	"DefaultRepartitionPurgeInterval", "DefaultFetchMaxPartitionBytes", "DefaultFetchMaxBytes",
	// the host
	"Host", "New", "Option", "WithLogger", "WithEmbeddedPort", "WithRestoreProgress", "Validate",
	// the hooks of host/testdriver: an option whose type is internal, so
	// only this module can pass one
	"WithDriver",
	// deploy
	"Deploy", "Rollback", "DeployResult", "RollbackResult", "SkippedVersion", "ErrAlreadyActive",
	"Pause", "Resume", "PauseResult", "ErrSamePause",
	// shadow runs (deploy --shadow, --shadow-first; wasmstream shadow): their report, field by field
	"DeployShadow", "StopShadow", "Shadow", "DeployShadowFirst", "ErrShadowRefused", "ErrNoShadow",
	"ShadowResult", "ShadowStatus", "ShadowCounts", "ShadowSample", "ShadowSide", "ShadowEmit",
	// interactive queries: the CLI's client
	"Query", "QueryResult",
	// reset (wasmstream reset)
	"Reset", "ResetOptions", "ResetResult",
	// replay (wasmstream replay)
	"Replay", "ReplayOptions", "ReplayResult", "ReplayState", "ReplayStateEmpty", "ReplayStateCurrent",
	// replay --diff-against: its result document, field by field
	"ReplayDiff", "ReplayDiffResult", "ReplayDiffTask", "ReplayDiffSample", "ReplayDiffSide", "ReplayEmit",
	"ReplayHeader", "ReplaySource",
	// a deployed version's bytes (replay --diff-against LABEL)
	"VersionModule",
	// plugin signatures (wasmstream plugin keygen|sign)
	"SignPlugin", "NewSigningKey", "SigningKeyFingerprint",
	// snapshots
	"ProcessorStats", "RestoreProgress", "PluginInfo", "PluginSymbol", "InspectPlugin", "InspectPluginWith",
	"VersionInfo", "Refusal", "ProcessorVersions",
	// the state directory, read-only
	"StateReader", "StateStore", "OpenStateReadOnly", "ErrStateInUse", "ErrNoState", "ErrStateCorrupt",
	// the topic commands
	"TopicTool", "OpenTopicTool", "ErrNoBrokers", "RecordHeader", "ProduceOptions", "ProduceResult",
	"ConsumeOptions", "ConsumeResult", "CreateTopicOptions",
}

// The public host package exports only its thin face, and none of its
// exported types is an alias (of an internal type, whose fields would be
// documented elsewhere).
func TestHostThinFace(t *testing.T) {
	target := module + "/host"
	p := list(t, nil, target)[target]
	consult(p)
	fset := token.NewFileSet()
	var exported []string
	for _, f := range p.GoFiles {
		file, err := parser.ParseFile(fset, filepath.Join(p.Dir, f), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					exported = append(exported, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							exported = append(exported, s.Name.Name)
							if s.Assign.IsValid() {
								t.Errorf("host/%s: type %s is an alias; a public type documents its own fields", f, s.Name.Name)
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								exported = append(exported, n.Name)
							}
						}
					}
				}
			}
		}
	}
	sort.Strings(exported)
	for _, name := range exported {
		if !slices.Contains(thinFace, name) {
			t.Errorf("host exports %s, which is not part of its thin face (move it under host/internal, or add it to thinFace with a reason)", name)
		}
	}
	for _, name := range thinFace {
		if !slices.Contains(exported, name) {
			t.Errorf("thinFace lists %s, which host no longer exports: the list is stale", name)
		}
	}
}
