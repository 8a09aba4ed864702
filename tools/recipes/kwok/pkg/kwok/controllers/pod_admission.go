// kwok admits a pod as the kubelet does, or refuses it in the kubelet's words: stock kwok ran whatever was bound to
// its nodes, however large, where a kubelet first admits a pod against the requests of the pods it admitted before
// (OutOfcpu, OutOfmemory, OutOfpods). esi's test_real_nodes holds the two to the same answer for the same pod.

package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"sigs.k8s.io/kwok/pkg/log"
)

// podAdmission is the kubelet's admission for the pods of kwok's nodes. A pod is judged once, when it is first
// seen bound, against the requests of the node's pods admitted before it that have neither finished nor gone:
// the pod count, then cpu, then memory. One that does not fit is refused in the kubelet's words (phase Failed,
// reason OutOf<resource>, a Warning Event), and kwok plays no stage on it but its deletion. A pod already
// running when first seen (kwok restarted) was admitted before and is counted as it is.
type podAdmission struct {
	mu       sync.Mutex
	admitted map[string]map[types.UID]podRequests // by node, then pod
	judged   map[types.UID]bool                   // admitted (true) or refused (false)
	held     map[types.UID]*corev1.Pod            // per pod seen, what kwok holds for it: heldFor
}

type podRequests struct {
	cpu, memory int64 // millicores, bytes
}

func newPodAdmission() *podAdmission {
	return &podAdmission{
		admitted: map[string]map[types.UID]podRequests{},
		judged:   map[types.UID]bool{},
		held:     map[types.UID]*corev1.Pod{},
	}
}

// heldFor is, of a pod, what letGo reads to free what kwok holds for it once it is gone.
func heldFor(pod *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Spec:       corev1.PodSpec{NodeName: pod.Spec.NodeName, HostNetwork: pod.Spec.HostNetwork},
		Status:     corev1.PodStatus{PodIP: pod.Status.PodIP, PodIPs: pod.Status.PodIPs},
	}
}

// admit tells whether kwok plays its stages on this version of a pod, judging the pod the first time.
func (c *PodController) admit(ctx context.Context, pod *corev1.Pod) bool {
	a := c.admission
	a.mu.Lock()
	a.held[pod.UID] = heldFor(pod)
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if admitted, seen := a.judged[pod.UID]; seen {
		if finished {
			a.free(pod.UID, pod.Spec.NodeName)
		}
		a.mu.Unlock()
		return admitted || pod.DeletionTimestamp != nil
	}
	if finished {
		a.mu.Unlock()
		return true
	}
	requests := requestsOf(pod)
	if pod.Status.Phase != corev1.PodRunning && pod.Status.PodIP == "" {
		if reason, message := a.refusal(c, pod.Spec.NodeName, requests); reason != "" {
			a.judged[pod.UID] = false
			a.mu.Unlock()
			go c.refuse(ctx, pod.DeepCopy(), reason, message)
			return pod.DeletionTimestamp != nil
		}
	}
	a.judged[pod.UID] = true
	on, ok := a.admitted[pod.Spec.NodeName]
	if !ok {
		on = map[types.UID]podRequests{}
		a.admitted[pod.Spec.NodeName] = on
	}
	on[pod.UID] = requests
	a.mu.Unlock()
	return true
}

// listed keeps, of the pods seen, those a listing of every pod found; the others are gone, and kwok lets go of
// their room, pod IPs and stages as at their deletion. A listing comes when the watch lost its place (the API
// server restarted, or compacted past it), and a pod deleted meanwhile sent no deletion: the kubelet likewise
// takes its source's full set after a relist. Then the pods of the listing not judged yet are judged oldest first,
// as the kubelet admits the pods it is given at once (the listing's Sync events, in its order, come after and
// find them judged).
func (c *PodController) listed(ctx context.Context, pods []*corev1.Pod) {
	gone := c.admission.keepOnly(pods)
	for _, pod := range gone {
		c.letGo(ctx, pod)
	}
	log.FromContext(ctx).Info("Pods listed", "count", len(pods), "gone", len(gone))
	oldestFirst := slices.Clone(pods)
	slices.SortStableFunc(oldestFirst, func(x, y *corev1.Pod) int {
		return x.CreationTimestamp.Compare(y.CreationTimestamp.Time)
	})
	for _, pod := range oldestFirst {
		if c.need(pod) && !c.readOnly(pod.Spec.NodeName) {
			c.admit(ctx, pod)
		}
	}
}

// keepOnly forgets every pod seen that is not among pods, and its room; what kwok held for each of those.
func (a *podAdmission) keepOnly(pods []*corev1.Pod) []*corev1.Pod {
	there := make(map[types.UID]bool, len(pods))
	for _, pod := range pods {
		there[pod.UID] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, on := range a.admitted {
		for uid := range on {
			if !there[uid] {
				delete(on, uid)
			}
		}
	}
	for uid := range a.judged {
		if !there[uid] {
			delete(a.judged, uid)
		}
	}
	var gone []*corev1.Pod
	for uid, held := range a.held {
		if !there[uid] {
			gone = append(gone, held)
			delete(a.held, uid)
		}
	}
	return gone
}

// forget lets a deleted pod's room go.
func (c *PodController) forget(pod *corev1.Pod) {
	a := c.admission
	a.mu.Lock()
	defer a.mu.Unlock()
	a.free(pod.UID, pod.Spec.NodeName)
	delete(a.judged, pod.UID)
	delete(a.held, pod.UID)
}

// letGo frees what kwok holds for a pod that is gone: its pod IPs, and its stage still waiting to be played.
func (c *PodController) letGo(ctx context.Context, pod *corev1.Pod) {
	c.recyclingPodIP(ctx, pod)
	if job, ok := c.delayQueueMapping.LoadAndDelete(log.KObj(pod).String()); ok {
		c.delayQueue.Cancel(job)
	}
}

func (a *podAdmission) free(uid types.UID, node string) {
	if on, ok := a.admitted[node]; ok {
		delete(on, uid)
	}
}

// refusal is the kubelet's reason and message for refusing a pod of these requests on the node; "" if it fits.
func (a *podAdmission) refusal(c *PodController, nodeName string, requests podRequests) (string, string) {
	if c.nodeCacheGetter == nil {
		return "", ""
	}
	node, ok := c.nodeCacheGetter.Get(nodeName)
	if !ok {
		return "", ""
	}
	var cpu, memory int64
	on := a.admitted[nodeName]
	for _, r := range on {
		cpu += r.cpu
		memory += r.memory
	}
	allocatable := node.Status.Allocatable
	for _, check := range []struct {
		resource                  corev1.ResourceName
		requested, used, capacity int64
	}{
		{corev1.ResourcePods, 1, int64(len(on)), allocatable.Pods().Value()},
		{corev1.ResourceCPU, requests.cpu, cpu, allocatable.Cpu().MilliValue()},
		{corev1.ResourceMemory, requests.memory, memory, allocatable.Memory().Value()},
	} {
		if _, has := allocatable[check.resource]; !has || check.requested == 0 {
			continue
		}
		if check.used+check.requested > check.capacity {
			return "OutOf" + string(check.resource), fmt.Sprintf(
				"Pod was rejected: Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				check.resource, check.requested, check.used, check.capacity)
		}
	}
	return "", ""
}

// refuse writes the kubelet's refusal into the pod's status (for this pod only: its UID in the patch) and tells
// it as the kubelet does, in a Warning Event. While the API server is away or busy (no answer, 429, 5xx) the
// write is tried again, each wait twice the last up to 5 s; any other answer ends it (the pod is gone, or a pod
// made since under its name refuses the UID).
func (c *PodController) refuse(ctx context.Context, pod *corev1.Pod, reason, message string) {
	logger := log.FromContext(ctx).With("pod", log.KObj(pod), "node", pod.Spec.NodeName)
	data, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"phase": corev1.PodFailed, "reason": reason, "message": message},
	})
	if err != nil {
		logger.Error("Failed to refuse pod", "err", err, "reason", reason)
		return
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		_, err = c.typedClient.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		if err == nil {
			break
		}
		if !transient(err) {
			logger.Error("Failed to refuse pod", "err", err, "reason", reason)
			return
		}
		logger.Error("Failed to refuse pod, trying again", "err", err, "reason", reason, "wait", wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	logger.Info("Refuse pod", "reason", reason, "message", message)
	if c.recorder != nil {
		c.recorder.Event(pod, corev1.EventTypeWarning, reason, message)
	}
}

// transient tells whether the API server may take the same write later: it did not answer, or answered 429 or 5xx.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code == 429 || code >= 500
}

// requestsOf is what the kubelet counts of a pod: the larger of its containers' summed requests and each init
// container's, plus the pod's overhead.
func requestsOf(pod *corev1.Pod) podRequests {
	var cpu, memory int64
	for _, container := range pod.Spec.Containers {
		cpu += container.Resources.Requests.Cpu().MilliValue()
		memory += container.Resources.Requests.Memory().Value()
	}
	for _, container := range pod.Spec.InitContainers {
		cpu = max(cpu, container.Resources.Requests.Cpu().MilliValue())
		memory = max(memory, container.Resources.Requests.Memory().Value())
	}
	cpu += pod.Spec.Overhead.Cpu().MilliValue()
	memory += pod.Spec.Overhead.Memory().Value()
	return podRequests{cpu: cpu, memory: memory}
}
