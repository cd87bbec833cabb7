package main

// The part of kube-controller-manager's resourceclaim controller the workloads need (upstream's test runs that
// controller; this control plane runs none): for every pod naming a ResourceClaimTemplate in
// spec.resourceClaims, the ResourceClaim made from the template — named <pod>-<claim>-<random>, owned by the pod,
// annotated with the pod's claim name — and the pod's status.resourceClaimStatuses naming it (server-side apply,
// as the controller's syncPod and handleClaim in pkg/controller/resourceclaim/controller.go).
// With DRAWorkloadResourceClaims, a pod of a PodGroup whose claim is the PodGroup's (same name and template) gets
// the PodGroup's one claim instead, created owned by the PodGroup and named in the PodGroup's status
// (syncPodGroup, handlePodGroupClaim).
// Not here: re-creating a claim deleted behind the controller's back, reserving an allocated claim for a pod bound
// without the scheduler, the admin-access and prioritized-list feature checks.

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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
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
	return ownedClaim(metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}, podClaim, template)
}

// ownedClaim is the claim from template for owner's claim podClaim (a pod's, or a PodGroup's).
func ownedClaim(owner metav1.OwnerReference, podClaim string, template *resourcev1.ResourceClaimTemplate) *resourcev1.ResourceClaim {
	isTrue := true
	owner.Controller = &isTrue
	annotations := maps.Clone(template.Spec.ObjectMeta.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[resourcev1.PodResourceClaimAnnotation] = podClaim
	return &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    claimGenerateName(owner.Name, podClaim),
			OwnerReferences: []metav1.OwnerReference{owner},
			Annotations:     annotations,
			Labels:          template.Spec.ObjectMeta.Labels,
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
	client  kubernetes.Interface
	dynamic dynamic.Interface
	// groupClaims: DRAWorkloadResourceClaims is on, a PodGroup's claims are shared by its pods
	groupClaims bool
	store       cache.Store
	queue       workqueue.TypedRateLimitingInterface[string]
	mu          sync.Mutex
	// made: pod UID and claim name -> the claim created, so a retry after a failed status update does not make a
	// second one (upstream finds it by owner and annotation)
	made map[string]string
	wg   sync.WaitGroup
}

// startClaimController runs the controller until stop is closed, with workers workers.
func startClaimController(client kubernetes.Interface, dyn dynamic.Interface, groupClaims bool, stop <-chan struct{}, workers int) *claimController {
	cc := &claimController{client: client, dynamic: dyn, groupClaims: groupClaims, made: map[string]string{},
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
		if cc.groupClaims && pod.Spec.SchedulingGroup != nil && pod.Spec.SchedulingGroup.PodGroupName != nil {
			name, shared, err := cc.groupClaim(ctx, pod, podClaim)
			if err != nil {
				return err
			}
			if shared {
				newClaims[podClaim.Name] = name
				continue
			}
		}
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

var podGroupsResource = schema.GroupVersionResource{Group: "scheduling.k8s.io", Version: "v1beta1", Resource: "podgroups"}

// groupClaim is the PodGroup's claim for the pod's podClaim when the PodGroup has the same claim (name and
// template: resourceclaim.BindTo), created when it is not yet, and its name applied to the PodGroup's status.
func (cc *claimController) groupClaim(ctx context.Context, pod *v1.Pod, podClaim v1.PodResourceClaim) (string, bool, error) {
	groups := cc.dynamic.Resource(podGroupsResource).Namespace(pod.Namespace)
	pg, err := groups.Get(ctx, *pod.Spec.SchedulingGroup.PodGroupName, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("get PodGroup for Pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	claims, _, _ := unstructured.NestedSlice(pg.Object, "spec", "resourceClaims")
	matches := false
	for _, c := range claims {
		m, _ := c.(map[string]any)
		name, _ := m["name"].(string)
		tmpl, hasTmpl := m["resourceClaimTemplateName"].(string)
		_, hasClaim := m["resourceClaimName"]
		if name == podClaim.Name && !hasClaim && podClaim.ResourceClaimName == nil && hasTmpl && tmpl == *podClaim.ResourceClaimTemplateName {
			matches = true
		}
	}
	if !matches {
		return "", false, nil
	}
	id := string(pg.GetUID()) + "/" + podClaim.Name
	// one claim per PodGroup: its creation is not raced by the workers
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if name, done := cc.made[id]; done {
		return name, true, nil
	}
	template, err := cc.client.ResourceV1().ResourceClaimTemplates(pod.Namespace).Get(ctx, *podClaim.ResourceClaimTemplateName, metav1.GetOptions{})
	if err != nil {
		return "", false, fmt.Errorf("resource claim template %q: %w", *podClaim.ResourceClaimTemplateName, err)
	}
	owner := metav1.OwnerReference{APIVersion: podGroupsResource.GroupVersion().String(), Kind: "PodGroup", Name: pg.GetName(), UID: pg.GetUID()}
	claim, err := cc.client.ResourceV1().ResourceClaims(pod.Namespace).Create(ctx, ownedClaim(owner, podClaim.Name, template), metav1.CreateOptions{})
	if err != nil {
		return "", false, fmt.Errorf("create ResourceClaim for PodGroup %s/%s: %w", pod.Namespace, pg.GetName(), err)
	}
	cc.made[id] = claim.Name
	apply := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": podGroupsResource.GroupVersion().String(), "kind": "PodGroup",
		"metadata": map[string]any{"name": pg.GetName(), "namespace": pod.Namespace},
		"status":   map[string]any{"resourceClaimStatuses": []any{map[string]any{"name": podClaim.Name, "resourceClaimName": claim.Name}}},
	}}
	if _, err := groups.ApplyStatus(ctx, pg.GetName(), apply, metav1.ApplyOptions{FieldManager: claimsFieldManager, Force: true}); err != nil {
		return "", false, fmt.Errorf("update PodGroup %s/%s ResourceClaimStatuses: %w", pod.Namespace, pg.GetName(), err)
	}
	return claim.Name, true, nil
}
