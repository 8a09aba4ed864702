package controllers

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/types"
)

// withUIDPrecondition makes a patch apply to the pod of that UID only, as the kubelet's status patches do: the
// API server refuses it (422) when the pod of that name is another one, made since.
func withUIDPrecondition(patchType types.PatchType, data []byte, uid types.UID) ([]byte, error) {
	switch patchType {
	case types.JSONPatchType:
		var ops []json.RawMessage
		if err := json.Unmarshal(data, &ops); err != nil {
			return nil, err
		}
		test, err := json.Marshal(map[string]string{"op": "test", "path": "/metadata/uid", "value": string(uid)})
		if err != nil {
			return nil, err
		}
		return json.Marshal(append([]json.RawMessage{test}, ops...))
	case types.MergePatchType, types.StrategicMergePatchType:
		var patch map[string]json.RawMessage
		if err := json.Unmarshal(data, &patch); err != nil {
			return nil, err
		}
		metadata := map[string]json.RawMessage{}
		if raw, ok := patch["metadata"]; ok {
			if err := json.Unmarshal(raw, &metadata); err != nil {
				return nil, err
			}
		}
		value, err := json.Marshal(string(uid))
		if err != nil {
			return nil, err
		}
		metadata["uid"] = value
		if patch["metadata"], err = json.Marshal(metadata); err != nil {
			return nil, err
		}
		return json.Marshal(patch)
	}
	return data, nil
}
