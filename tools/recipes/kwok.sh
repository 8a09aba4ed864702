# kwok (the node and pod lifecycle simulator) and kwokctl (cluster lifecycle; we use its binary runtime), with
# one patch so that kwok writes to pods as the kubelet does.
cd "$WORK"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/kwok 1.24

step "resolve dependencies"
go get -tool "sigs.k8s.io/kwok/cmd/kwok@v$VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@v$VERSION"

step "patch kwok: a pod's deletion and status patches carry the pod's UID as precondition"
# The kubelet deletes a pod it has stopped with the pod's UID as precondition, and puts the UID in its status
# patches (its status manager), so a pod made since under the same name is left alone. kwok wrote by name:
# when it fell behind, its late DELETE took such a pod, and its late status patch marked it Running.
src="$WORK/kwok-src"
[ ! -e "$src" ] || chmod -R u+w "$src"  # a copy of the module cache's read-only files, left by an earlier run
rm -rf "$src"
cp -R "$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$VERSION" "$src"
chmod -R u+w "$src"
patch --quiet -d "$src" -p1 <<'PATCH'
--- a/pkg/kwok/controllers/pod_controller.go
+++ b/pkg/kwok/controllers/pod_controller.go
@@ -18,15 +18,18 @@
 
 import (
 	"context"
+	"encoding/json"
 	"fmt"
 	"net"
 	"sync/atomic"
 	"time"
 
 	corev1 "k8s.io/api/core/v1"
+	apierrors "k8s.io/apimachinery/pkg/api/errors"
 	"k8s.io/apimachinery/pkg/api/meta"
 	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
 	"k8s.io/apimachinery/pkg/labels"
+	"k8s.io/apimachinery/pkg/types"
 	"k8s.io/client-go/dynamic"
 	"k8s.io/client-go/kubernetes"
 	"k8s.io/client-go/rest"
@@ -177,7 +180,13 @@
 		"node", pod.Spec.NodeName,
 	)
 
-	err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)
+	opt := deleteOpt
+	opt.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
+	err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opt)
+	if apierrors.IsConflict(err) {
+		logger.Info("Skip deleting pod", "reason", "replaced by a pod of the same name")
+		return nil
+	}
 	if err != nil {
 		return err
 	}
@@ -451,7 +460,11 @@
 		client = tc
 	}
 
-	result, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, patch.Type, patch.Data, metav1.PatchOptions{}, subresource...)
+	data, err := withUIDPrecondition(patch.Type, patch.Data, pod.UID)
+	if err != nil {
+		return nil, err
+	}
+	result, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, patch.Type, data, metav1.PatchOptions{}, subresource...)
 	if err != nil {
 		return nil, err
 	}
@@ -459,6 +472,44 @@
 	return result, nil
 }
 
+// withUIDPrecondition makes a patch apply to the pod of that UID only, as the kubelet's status patches do: the
+// API server refuses it (422) when the pod of that name is another one, made since.
+func withUIDPrecondition(patchType types.PatchType, data []byte, uid types.UID) ([]byte, error) {
+	switch patchType {
+	case types.JSONPatchType:
+		var ops []json.RawMessage
+		if err := json.Unmarshal(data, &ops); err != nil {
+			return nil, err
+		}
+		test, err := json.Marshal(map[string]string{"op": "test", "path": "/metadata/uid", "value": string(uid)})
+		if err != nil {
+			return nil, err
+		}
+		return json.Marshal(append([]json.RawMessage{test}, ops...))
+	case types.MergePatchType, types.StrategicMergePatchType:
+		var patch map[string]json.RawMessage
+		if err := json.Unmarshal(data, &patch); err != nil {
+			return nil, err
+		}
+		metadata := map[string]json.RawMessage{}
+		if raw, ok := patch["metadata"]; ok {
+			if err := json.Unmarshal(raw, &metadata); err != nil {
+				return nil, err
+			}
+		}
+		value, err := json.Marshal(string(uid))
+		if err != nil {
+			return nil, err
+		}
+		metadata["uid"] = value
+		if patch["metadata"], err = json.Marshal(metadata); err != nil {
+			return nil, err
+		}
+		return json.Marshal(patch)
+	}
+	return data, nil
+}
+
 func (c *PodController) need(pod *corev1.Pod) bool {
 	if _, has := c.nodeGetFunc(pod.Spec.NodeName); !has {
 		return false
PATCH
go mod edit -replace "sigs.k8s.io/kwok=$src"

for c in kwok kwokctl; do
    step "compile $c"
    go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$c" "sigs.k8s.io/kwok/cmd/$c"
done

step "check the version"
"$OUT/bin/kwokctl" --version >version.txt
grep -q "v$VERSION" version.txt
