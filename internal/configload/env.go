package configload

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/knadh/koanf/maps"

	"github.com/wasmstream/wasmstream/host"
)

// envTree turns the flat environment keys ("processors.0.inputs") into the
// config tree, with lists given by index: a map whose keys are all
// 0, 1, 2... becomes a list, merged element by element into the list the
// file already has at that path (existing: the file's tree). So
// WASMSTREAM_PROCESSORS__0__ON_ERROR=skip changes the first processor of
// the file, and WASMSTREAM_PROCESSORS__0__NAME=... and friends declare
// processors with no file at all. Indices must not leave gaps.
func envTree(flat map[string]any, existing map[string]any) (map[string]any, error) {
	tree := maps.Unflatten(flat, ".")
	out, err := listsFromIndexes("", tree, existing)
	if err != nil {
		return nil, err
	}
	return out.(map[string]any), nil
}

func listsFromIndexes(path string, v any, existing any) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return v, nil
	}
	idx := make([]int, 0, len(m))
	for k := range m {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 {
			idx = nil
			break
		}
		idx = append(idx, i)
	}
	if len(m) == 0 || idx == nil {
		// A map: recurse with what the file has under each key.
		em, _ := existing.(map[string]any)
		out := make(map[string]any, len(m))
		for k, sub := range m {
			conv, err := listsFromIndexes(join(path, k), sub, em[k])
			if err != nil {
				return nil, err
			}
			out[k] = conv
		}
		return out, nil
	}
	sort.Ints(idx)
	var list []any
	if el, ok := existing.([]any); ok {
		list = append(list, el...)
	}
	for _, i := range idx {
		if i > len(list) {
			return nil, &host.ConfigError{Path: fmt.Sprintf("%s[%d]", path, i), Problem: fmt.Sprintf("set by the environment, but %s has %d elements (indices start at 0, without gaps)", path, len(list))}
		}
		var cur any
		if i < len(list) {
			cur = list[i]
		}
		conv, err := listsFromIndexes(fmt.Sprintf("%s[%d]", path, i), m[strconv.Itoa(i)], cur)
		if err != nil {
			return nil, err
		}
		if cm, ok := cur.(map[string]any); ok {
			if nm, ok := conv.(map[string]any); ok {
				conv = mergeMaps(cm, nm)
			}
		}
		if i == len(list) {
			list = append(list, conv)
		} else {
			list[i] = conv
		}
	}
	return list, nil
}

// mergeMaps returns base with over's keys set on it, recursively.
func mergeMaps(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		bm, ok1 := out[k].(map[string]any)
		om, ok2 := v.(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeMaps(bm, om)
		} else {
			out[k] = v
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
