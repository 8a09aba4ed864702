# kwok (the node and pod lifecycle simulator) and kwokctl (cluster lifecycle; we use its binary runtime), with
# one patch so that kwok deletes pods as the kubelet does.
cd "$WORK"

step "write the wrapper module"
go_wrapper_module esi.local/toolchain/kwok 1.24

step "resolve dependencies"
go get -tool "sigs.k8s.io/kwok/cmd/kwok@v$VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@v$VERSION"

step "patch kwok: a pod's deletion carries the pod's UID as precondition"
# The kubelet deletes a pod it has stopped with the pod's UID as precondition (its status manager), so a pod
# made since under the same name is left alone; kwok deleted by name, and its late DELETE took such a pod.
src="$WORK/kwok-src"
[ ! -e "$src" ] || chmod -R u+w "$src"  # a copy of the module cache's read-only files, left by an earlier run
rm -rf "$src"
cp -R "$(go env GOMODCACHE)/sigs.k8s.io/kwok@v$VERSION" "$src"
chmod -R u+w "$src"
patch --quiet -d "$src" -p1 <<'PATCH'
--- a/pkg/kwok/controllers/pod_controller.go
+++ b/pkg/kwok/controllers/pod_controller.go
@@ -24,6 +24,7 @@
 	"time"
 
 	corev1 "k8s.io/api/core/v1"
+	apierrors "k8s.io/apimachinery/pkg/api/errors"
 	"k8s.io/apimachinery/pkg/api/meta"
 	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
 	"k8s.io/apimachinery/pkg/labels"
@@ -177,7 +178,13 @@
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
PATCH
go mod edit -replace "sigs.k8s.io/kwok=$src"

for c in kwok kwokctl; do
    step "compile $c"
    go build -trimpath -ldflags "-s -w" -o "$OUT/bin/$c" "sigs.k8s.io/kwok/cmd/$c"
done

step "check the version"
"$OUT/bin/kwokctl" --version >version.txt
grep -q "v$VERSION" version.txt
