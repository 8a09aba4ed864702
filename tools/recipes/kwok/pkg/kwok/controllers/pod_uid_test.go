package controllers

import (
	"context"
	"encoding/json"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
)

func TestAJSONPatchFirstTestsThePodsUID(t *testing.T) {
	data, err := withUIDPrecondition(types.JSONPatchType, []byte(`[{"op":"replace","path":"/status/phase","value":"Running"}]`), "u1")
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"test","path":"/metadata/uid","value":"u1"},{"op":"replace","path":"/status/phase","value":"Running"}]`
	if string(data) != want {
		t.Errorf("%s", data)
	}
}

func TestAMergePatchNamesThePodsUIDBesideItsOwnMetadata(t *testing.T) {
	for _, patchType := range []types.PatchType{types.MergePatchType, types.StrategicMergePatchType} {
		data, err := withUIDPrecondition(patchType, []byte(`{"metadata":{"labels":{"a":"b"}},"status":{"phase":"Running"}}`), "u1")
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		metadata := got["metadata"].(map[string]any)
		if metadata["uid"] != "u1" || metadata["labels"].(map[string]any)["a"] != "b" || got["status"] == nil {
			t.Errorf("%s: %s", patchType, data)
		}
	}
}

func TestAnApplyPatchIsLeftAsItIs(t *testing.T) {
	data, err := withUIDPrecondition(types.ApplyPatchType, []byte(`{"status":{}}`), "u1")
	if err != nil || string(data) != `{"status":{}}` {
		t.Errorf("%s %v", data, err)
	}
}

func TestAPodIsDeletedByUIDAndAPodMadeSinceUnderItsNameIsLeftAlone(t *testing.T) {
	pod := testPod("p", "", "", 0)
	c, clientset, _ := kubelet(t)
	var preconditions []string
	clientset.PrependReactor("delete", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		uid := action.(clienttesting.DeleteAction).GetDeleteOptions().Preconditions.UID
		preconditions = append(preconditions, string(*uid))
		return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", nil)
	})

	if err := c.deleteResource(context.Background(), pod); err != nil {
		t.Errorf("a conflict means the pod was replaced, not an error: %v", err)
	}
	if len(preconditions) != 1 || preconditions[0] != string(pod.UID) {
		t.Errorf("preconditions %v", preconditions)
	}
}
