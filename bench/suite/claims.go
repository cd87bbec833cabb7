package main

// The part of kube-controller-manager's resourceclaim controller the workloads need (upstream's test runs that
// controller; this control plane runs none): for every pod naming a ResourceClaimTemplate in
// spec.resourceClaims, the ResourceClaim made from the template — named <pod>-<claim>-<random>, owned by the pod,
// annotated with the pod's claim name — and the pod's status.resourceClaimStatuses naming it (server-side apply,
// as the controller's syncPod and handleClaim in pkg/controller/resourceclaim/controller.go).
// Not here: re-creating a claim deleted behind the controller's back, reserving an allocated claim for a pod bound
// without the scheduler, PodGroup claims, the admin-access and prioritized-list feature checks.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// claimsFieldManager is the controller's field manager for the pod status it applies.
const claimsFieldManager = "ResourceClaimController"

// claimGenerateName is the generateName of pod's claim for podClaim: <pod>-<claim>-, both parts cut in
// proportion when longer than 57 characters (room for the API server's five random ones in 63), as upstream's.
func claimGenerateName(pod, podClaim string) string {
	generateName := pod + "-" + podClaim + "-"
	const maxBaseLen = 57
	if len(generateName) > maxBaseLen {
		generateName = pod[0:len(pod)*maxBaseLen/len(generateName)] + "-" + podClaim[0:len(podClaim)*maxBaseLen/len(generateName)]
	}
	return generateName
}

// claimFromTemplate is the ResourceClaim the controller creates for pod's podClaim from template.
func claimFromTemplate(pod *v1.Pod, podClaim string, template *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	isTrue := true
	annotations := maps.Clone(template.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourcev1.PodResourceClaimAnnotation] = podClaim
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: claimGenerateName(pod.Name, podClaim),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: &isTrue,
			}},
			Annotations: annotations,
			Labels:      template.Spec.ObjectMeta.Labels,
		},
		Spec: template.Spec.Spec,
	}
}

// claimsMissing are the pod's claims from templates that its status does not name yet.
func claimsMissing(pod *v1.Pod) []v1.PodResourceClaim {
	if pod.DeletionTimestamp != nil {
		return nil
	}
	have := map[string]bool{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		have[s.Name] = true
	}
	var out []v1.PodResourceClaim
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName != nil && !have[c.Name] {
			out = append(out, c)
		}
	}
	return out
}

// claimController creates the claims of the pods of a run.
type claimController struct {
	client kubernetes.Interface
	store  cache.Store
	queue  workqueue.TypedRateLimitingInterface[string]
	mu     sync.Mutex
	// made: pod UID and claim name -> the claim created, so a retry after a failed status update does not make a
	// second one (upstream finds it by owner and annotation)
	made map[string]string
	wg   sync.WaitGroup
}

// startClaimController runs the controller until stop is closed, with workers workers.
func startClaimController(client kubernetes.Interface, stop <-chan struct{}, workers int) *claimController {
	cc := &claimController{client: client, made: map[string]string{},
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, time.Second))}
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "pods", "", fieldsEverything())
	inf := cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
	enqueue := func(obj any) {
		if pod, ok := obj.(*v1.Pod); ok && len(claimsMissing(pod)) > 0 {
			cc.queue.Add(pod.Namespace + "/" + pod.Name)
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	cc.store = inf.GetStore()
	go inf.Run(stop)
	cache.WaitForCacheSync(stop, inf.HasSynced)
	for w := 0; w < workers; w++ {
		cc.wg.Add(1)
		go func() {
			defer cc.wg.Done()
			for cc.next() {
			}
		}()
	}
	go func() {
		<-stop
		cc.queue.ShutDown()
	}()
	return cc
}

func (cc *claimController) next() bool {
	key, quit := cc.queue.Get()
	if quit {
		return false
	}
	defer cc.queue.Done(key)
	if err := cc.syncPod(context.Background(), key); err != nil {
		cc.queue.AddRateLimited(key)
		return true
	}
	cc.queue.Forget(key)
	return true
}

// syncPod creates the pod's missing claims and applies the statuses naming them.
func (cc *claimController) syncPod(ctx context.Context, key string) error {
	obj, exists, err := cc.store.GetByKey(key)
	if err != nil || !exists {
		return err
	}
	pod := obj.(*v1.Pod)
	missing := claimsMissing(pod)
	if len(missing) == 0 {
		return nil
	}
	newClaims := map[string]string{}
	for _, podClaim := range missing {
		id := string(pod.UID) + "/" + podClaim.Name
		cc.mu.Lock()
		name, done := cc.made[id]
		cc.mu.Unlock()
		if !done {
			template, err := cc.client.ResourceV1().ResourceClaimTemplates(pod.Namespace).Get(ctx, *podClaim.ResourceClaimTemplateName, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("resource claim template %q: %w", *podClaim.ResourceClaimTemplateName, err)
			}
			claim, err := cc.client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, claimFromTemplate(pod, podClaim.Name, template), metav1.CreateOptions{})
			if err != nil {
				return fmt.Errorf("create ResourceClaim for %s: %w", key, err)
			}
			name = claim.Name
			cc.mu.Lock()
			cc.made[id] = name
			cc.mu.Unlock()
		}
		newClaims[podClaim.Name] = name
	}
	merged := map[string]string{}
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			merged[s.Name] = *s.ResourceClaimName
		}
	}
	maps.Copy(merged, newClaims)
	names := slices.Sorted(maps.Keys(merged))
	statuses := make([]*corev1apply.PodResourceClaimStatusApplyConfiguration, 0, len(names))
	for _, n := range names {
		statuses = append(statuses, corev1apply.PodResourceClaimStatus().WithName(n).WithResourceClaimName(merged[n]))
	}
	apply := corev1apply.Pod(pod.Name, pod.Namespace).WithStatus(corev1apply.PodStatus().WithResourceClaimStatuses(statuses...))
	_, err = cc.client.CoreV1().Pods(pod.Namespace).ApplyStatus(ctx, apply, metav1.ApplyOptions{FieldManager: claimsFieldManager, Force: true})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("update pod %s ResourceClaimStatuses: %w", key, err)
	}
	return nil
}
