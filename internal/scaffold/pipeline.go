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
