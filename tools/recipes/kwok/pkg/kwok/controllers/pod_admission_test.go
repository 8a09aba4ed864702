package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/informer"
	"sigs.k8s.io/kwok/pkg/utils/queue"
)

// nodes is a node cache of fixed nodes.
type nodes map[string]*corev1.Node

func (n nodes) Get(name string) (*corev1.Node, bool) { node, ok := n[name]; return node, ok }

func (n nodes) GetWithNamespace(name, _ string) (*corev1.Node, bool) { return n.Get(name) }

func (n nodes) List() []*corev1.Node {
	list := make([]*corev1.Node, 0, len(n))
	for _, node := range n {
		list = append(list, node)
	}
	return list
}

// node has room for 1 cpu, 2Gi of memory and 3 pods; its pods take addresses of 10.0.0.0/24.
var node = &corev1.Node{
	ObjectMeta: metav1.ObjectMeta{Name: "node"},
	Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
	Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1"),
		corev1.ResourceMemory: resource.MustParse("2Gi"),
		corev1.ResourcePods:   resource.MustParse("3"),
	}},
}

// testPod is a pod bound to node that requests cpu and memory; created the given number of seconds after a fixed time.
func testPod(name, cpu, memory string, created int) *corev1.Pod {
	requests := corev1.ResourceList{}
	if cpu != "" {
		requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		requests[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1_000_000+created), 0)),
		},
		Spec: corev1.PodSpec{
			NodeName:   node.Name,
			Containers: []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{Requests: requests}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
}

// kubelet is a pod controller for node, over an API server holding pods; what it told is in recorder.Events.
func kubelet(t *testing.T, pods ...*corev1.Pod) (*PodController, *fake.Clientset, *record.FakeRecorder) {
	t.Helper()
	objects := make([]runtime.Object, 0, len(pods))
	for _, pod := range pods {
		objects = append(objects, pod)
	}
	clientset := fake.NewClientset(objects...)
	recorder := record.NewFakeRecorder(10)
	c := &PodController{
		typedClient:     clientset,
		nodeCacheGetter: nodes{node.Name: node},
		nodeGetFunc: func(name string) (*NodeInfo, bool) {
			return &NodeInfo{}, name == node.Name
		},
		delayQueue: queue.NewWeightDelayingQueue[resourceStageJob[*corev1.Pod]](clock.RealClock{}),
		recorder:   recorder,
		admission:  newPodAdmission(),
	}
	return c, clientset, recorder
}

// told waits for what the controller told in an Event.
func told(t *testing.T, recorder *record.FakeRecorder) string {
	t.Helper()
	select {
	case event := <-recorder.Events:
		return event
	case <-time.After(10 * time.Second):
		t.Fatal("no Event was told")
		return ""
	}
}

func statusOf(t *testing.T, clientset *fake.Clientset, name string) corev1.PodStatus {
	t.Helper()
	pod, err := clientset.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Status
}

func TestAPodThatDoesNotFitBesideTheAdmittedOnesIsRefusedInTheKubeletsWords(t *testing.T) {
	first, second := testPod("first", "600m", "", 0), testPod("second", "600m", "", 1)
	c, clientset, recorder := kubelet(t, first, second)
	ctx := context.Background()

	if !c.admit(ctx, first) {
		t.Fatal("the first pod fits and is admitted")
	}
	if c.admit(ctx, second) {
		t.Fatal("the second pod does not fit beside the first and is refused")
	}

	message := "Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000"
	if event := told(t, recorder); event != "Warning OutOfcpu "+message {
		t.Errorf("Event %q", event)
	}
	status := statusOf(t, clientset, "second")
	if status.Phase != corev1.PodFailed || status.Reason != "OutOfcpu" || status.Message != message {
		t.Errorf("status %s %q %q", status.Phase, status.Reason, status.Message)
	}
	if status := statusOf(t, clientset, "first"); status.Phase != corev1.PodPending {
		t.Errorf("the admitted pod's status was written: %s", status.Phase)
	}
}

func TestThePodControllerPlaysStagesOnlyOnThePodsItAdmitted(t *testing.T) {
	first, second, third, fourth := testPod("first", "600m", "", 0), testPod("second", "600m", "", 1), testPod("third", "600m", "", 2), testPod("fourth", "600m", "", 3)
	c, _, recorder := kubelet(t, first, second, third, fourth)
	c.preprocessChan = make(chan *corev1.Pod, 10)
	events := make(chan informer.Event[*corev1.Pod], 10)
	events <- informer.Event[*corev1.Pod]{Type: informer.Added, Object: first}
	events <- informer.Event[*corev1.Pod]{Type: informer.Added, Object: second} // no room beside first
	events <- informer.Event[*corev1.Pod]{Type: informer.Deleted, Object: first}
	events <- informer.Event[*corev1.Pod]{Type: informer.Added, Object: third}  // first's room
	events <- informer.Event[*corev1.Pod]{Type: informer.Listed}                // third went meanwhile
	events <- informer.Event[*corev1.Pod]{Type: informer.Added, Object: fourth} // third's room
	close(events)

	c.watchResources(context.Background(), events)

	close(c.preprocessChan)
	var played []string
	for pod := range c.preprocessChan {
		played = append(played, pod.Name)
	}
	if fmt.Sprint(played) != "[first third fourth]" {
		t.Errorf("stages played on %v", played)
	}
	if event := told(t, recorder); event != "Warning OutOfcpu Pod was rejected: Node didn't have enough resource: cpu, requested: 600, used: 600, capacity: 1000" {
		t.Errorf("Event %q", event)
	}
}

func TestThePodCountIsJudgedFirstThenCPUThenMemory(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    []*corev1.Pod
		pod       *corev1.Pod
		refusal   string
		requested string
	}{
		{"memory", []*corev1.Pod{testPod("a", "", "1536Mi", 0)}, testPod("p", "100m", "1Gi", 1), "OutOfmemory", "memory, requested: 1073741824, used: 1610612736, capacity: 2147483648"},
		{"cpu before memory", []*corev1.Pod{testPod("a", "1", "2Gi", 0)}, testPod("p", "1", "1Gi", 1), "OutOfcpu", "cpu, requested: 1000, used: 1000, capacity: 1000"},
		{"pods before cpu", []*corev1.Pod{testPod("a", "1", "", 0), testPod("b", "", "", 1), testPod("c", "", "", 2)}, testPod("p", "1", "", 3), "OutOfpods", "pods, requested: 1, used: 3, capacity: 3"},
		{"a pod requesting nothing is not held to cpu or memory", []*corev1.Pod{testPod("a", "1", "2Gi", 0)}, testPod("p", "", "", 1), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := kubelet(t)
			admitted := map[types.UID]podRequests{}
			for _, pod := range tc.before {
				admitted[pod.UID] = requestsOf(pod)
			}
			c.admission.admitted[node.Name] = admitted
			reason, message := c.admission.refusal(c, node.Name, requestsOf(tc.pod))
			if reason != tc.refusal {
				t.Errorf("reason %q, want %q", reason, tc.refusal)
			}
			want := ""
			if tc.requested != "" {
				want = "Pod was rejected: Node didn't have enough resource: " + tc.requested
			}
			if message != want {
				t.Errorf("message %q, want %q", message, want)
			}
		})
	}
}

func TestAPodIsJudgedOnceAndARefusedOneIsStillDeleted(t *testing.T) {
	big, late := testPod("big", "1", "", 0), testPod("late", "1", "", 1)
	c, _, recorder := kubelet(t, big, late)
	ctx := context.Background()

	c.admit(ctx, big)
	c.admit(ctx, late)
	told(t, recorder)
	running := big.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	if !c.admit(ctx, running) {
		t.Error("an admitted pod stays admitted")
	}
	if c.admit(ctx, late) {
		t.Error("a refused pod stays refused")
	}
	deleted := late.DeepCopy()
	deleted.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	if !c.admit(ctx, deleted) {
		t.Error("kwok plays the deletion of a refused pod")
	}
}

func TestRoomIsFreedWhenAPodFinishesOrIsDeleted(t *testing.T) {
	a, b, d := testPod("a", "1", "", 0), testPod("b", "1", "", 1), testPod("d", "1", "", 2)
	c, _, _ := kubelet(t)
	ctx := context.Background()

	c.admit(ctx, a)
	succeeded := a.DeepCopy()
	succeeded.Status.Phase = corev1.PodSucceeded
	c.admit(ctx, succeeded)
	if !c.admit(ctx, b) {
		t.Fatal("a finished pod holds no room")
	}
	c.forget(b)
	if !c.admit(ctx, d) {
		t.Fatal("a deleted pod holds no room")
	}
}

func TestAPodRunningWhenFirstSeenWasAdmittedBefore(t *testing.T) {
	a, b := testPod("a", "1", "", 0), testPod("b", "1", "", 1)
	b.Status.Phase = corev1.PodRunning
	c, _, _ := kubelet(t)
	ctx := context.Background()

	c.admit(ctx, a)
	if !c.admit(ctx, b) {
		t.Fatal("a running pod (kwok restarted) is counted as it is")
	}
	if got := len(c.admission.admitted[node.Name]); got != 2 {
		t.Errorf("%d pods counted, want 2", got)
	}
}

func TestAListingLetsGoOfThePodsGoneAndJudgesTheNewOnesOldestFirst(t *testing.T) {
	gone := testPod("gone", "1", "", 0)
	gone.Status.Phase = corev1.PodRunning
	gone.Status.PodIP = "10.0.0.7"
	// In name order the newer comes first: a listing is in name order, and the kubelet admits by age.
	newer, older := testPod("a-newer", "1", "", 2), testPod("b-older", "1", "", 1)
	c, _, recorder := kubelet(t, newer, older)
	ctx := context.Background()
	c.admit(ctx, gone)
	key := log.KObj(gone).String()
	c.delayQueueMapping.Store(key, resourceStageJob[*corev1.Pod]{Resource: gone, Key: key})

	c.listed(ctx, []*corev1.Pod{newer, older})

	if event := told(t, recorder); event != "Warning OutOfcpu Pod was rejected: Node didn't have enough resource: cpu, requested: 1000, used: 1000, capacity: 1000" {
		t.Errorf("Event %q", event)
	}
	if admitted, judged := c.admission.judged[older.UID]; !judged || !admitted {
		t.Error("the older pod is admitted into the room of the pod gone")
	}
	if admitted, judged := c.admission.judged[newer.UID]; !judged || admitted {
		t.Error("the newer pod is refused")
	}
	if _, held := c.admission.held[gone.UID]; held {
		t.Error("the pod gone is forgotten")
	}
	if _, waiting := c.delayQueueMapping.Load(key); waiting {
		t.Error("the stage of the pod gone is cancelled")
	}
	pool, err := c.ipPool(node.Spec.PodCIDR)
	if err != nil {
		t.Fatal(err)
	}
	if ip := pool.Get(); ip != gone.Status.PodIP {
		t.Errorf("the pool hands out %s first, not the address of the pod gone", ip)
	}
}

func TestTheKubeletCountsTheLargerOfItsContainersAndEachInitContainerPlusOverhead(t *testing.T) {
	pod := testPod("p", "500m", "1Gi", 0)
	pod.Spec.Containers = append(pod.Spec.Containers, testPod("q", "250m", "1Gi", 0).Spec.Containers...)
	pod.Spec.InitContainers = testPod("init", "1", "512Mi", 0).Spec.Containers
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}

	if got, want := requestsOf(pod), (podRequests{cpu: 1100, memory: 2 << 30}); got != want {
		t.Errorf("requests %+v, want %+v", got, want)
	}
}

func TestARefusalIsWrittenAgainWhileTheAPIServerIsBusy(t *testing.T) {
	pod := testPod("p", "1", "", 0)
	c, clientset, recorder := kubelet(t, pod)
	answers := []error{
		apierrors.NewTooManyRequests("busy", 0),
		apierrors.NewServiceUnavailable("away"),
	}
	clientset.PrependReactor("patch", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		if len(answers) == 0 {
			return false, nil, nil
		}
		err := answers[0]
		answers = answers[1:]
		return true, nil, err
	})

	c.refuse(context.Background(), pod, "OutOfcpu", "no room")

	if status := statusOf(t, clientset, "p"); status.Reason != "OutOfcpu" {
		t.Errorf("the refusal was not written: %+v", status)
	}
	told(t, recorder)
}

func TestOnlyNoAnswer429And5xxAreTransient(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for err, want := range map[error]bool{
		fmt.Errorf("connection refused"):                              true,
		apierrors.NewTooManyRequests("busy", 1):                       true,
		apierrors.NewInternalError(fmt.Errorf("etcd")):                true,
		apierrors.NewNotFound(pods, "p"):                              false,
		apierrors.NewConflict(pods, "p", fmt.Errorf("x")):             false,
		apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil): false,
	} {
		if got := transient(err); got != want {
			t.Errorf("transient(%v) = %v", err, got)
		}
	}
}
