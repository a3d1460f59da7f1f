package capihub

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// LostFields lists the paths of written's leaves that read lacks or holds another value at: what kube-apiserver
// pruned or changed of an object written and read back (read may add fields: defaults). Both are compared as
// encoding/json reads them (one number type).
func LostFields(written, read any) ([]string, error) {
	w, err := viaJSON(written)
	if err != nil {
		return nil, err
	}
	r, err := viaJSON(read)
	if err != nil {
		return nil, err
	}
	return lost(w, r, ""), nil
}

func viaJSON(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, json.Unmarshal(data, &out)
}

func lost(written, read any, path string) []string {
	switch w := written.(type) {
	case map[string]any:
		r, _ := read.(map[string]any)
		var out []string
		for k, v := range w {
			out = append(out, lost(v, r[k], path+"."+k)...)
		}
		return out
	case []any:
		r, _ := read.([]any)
		if len(r) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, lost(w[i], r[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if !reflect.DeepEqual(written, read) {
		return []string{path}
	}
	return nil
}
