package scaffold

// The generated processor is the same in every language: it uppercases each
// record's value (ASCII letters), counts the records seen per key in the store
// "seen", and emits the result to "out" with the count in a header "seen".
// Its config may set "prefix", prepended to every value; the SDKs do not
// parse JSON, so the processors find it with a plain search (a real
// processor would use a JSON library).

const pipelineTemplate = `# A pipeline that runs the [[.Name]] processor. With kafka.brokers empty,
# wasmstream run starts an embedded development broker and creates the topics:
#   make && wasmstream run -c pipeline.yaml
app_id: [[.Name]]
kafka:
  brokers: []
processors:
  - name: [[.Name]]
    plugin: [[.Ident]].wasm
    inputs: [[ "[" ]][[.Name]]-in]
    outputs:
      out: [[.Name]]-out
    stores: [seen]
    config:
      prefix: ""
    on_error: dead_letter
    limits:
      memory: 16MiB
      record_timeout: 100ms
`

// casesTemplate are the pipeline's test cases, run in process by
// `wasmstream test pipeline.yaml cases.yaml` (host/testdriver).
const casesTemplate = `# Cases for the whole pipeline, run in process with the built plugin and
# no Kafka: make && wasmstream test pipeline.yaml cases.yaml
# Each case starts from empty topics and stores; steps pipe records in,
# commit, advance the wall clock (advance: 30s) and expect what was
# committed. The format: docs/testing.md in wasmstream's repository.
cases:
  - name: values are uppercased and counted per key
    steps:
      - pipe:
          topic: [[.Name]]-in
          records:
            - {key: a, value: hello, timestamp: 1s}
            - {key: a, value: again, timestamp: 2s}
            - {key: b, value: world, timestamp: 3s}
      - commit
      - expect:
          outputs:
            [[.Name]]-out:
              - {key: a, value: HELLO, headers: {seen: "1"}, timestamp: 1s}
              - {key: a, value: AGAIN, headers: {seen: "2"}}
              - {key: b, value: WORLD, headers: {seen: "1"}}
          stores:
            [[.Name]]:
              seen: [{key: a, value: "2"}, {key: b, value: "1"}]
  - name: a tombstone goes to the dead-letter topic
    steps:
      - pipe: {topic: [[.Name]]-in, records: [{key: a, value: null}]}
      - commit
      - expect:
          outputs: {[[.Name]]-out: []}
          dead_letters:
            [[.Name]]: [{key: a, value: null}]
`
