package prometheus_test

import "sort"

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		keys = append(keys, k+" "+v)
	}
	sort.Strings(keys)
	return keys
}
