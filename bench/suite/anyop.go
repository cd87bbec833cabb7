package main

// createAny and updateAny: any object from a template (DeviceClasses, ResourceSlices, ResourceClaims, Services, and
// updates of the workload's own pods and nodes), through the dynamic client, as upstream's operations of those
// names. Pods get the run's scheduler name, as createPods gives them; what createAny made is deleted at cleanup.

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// made is one object createAny created, for cleanup.
type made struct {
	mapping   *meta.RESTMapping
	namespace string
	name      string
}

// mapping resolves a template's kind to its resource (discovery, cached for the run).
func (r *runner) mapping(obj *unstructured.Unstructured) (*meta.RESTMapping, error) {
	if r.mapper == nil {
		r.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(r.client.Discovery()))
	}
	gvk := obj.GroupVersionKind()
	m, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		// A kind the API server serves only after a feature gate, or one discovery has not seen yet.
		r.mapper.Reset()
		m, err = r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk, err)
	}
	return m, nil
}

// anyObject renders the op's template for one index and finds its resource; a namespace given to a cluster-scoped
// kind (or none to a namespaced one) is an error, as upstream's.
func (r *runner) anyObject(ctx context.Context, op Op, index int) (*unstructured.Unstructured, dynamic.ResourceInterface, *meta.RESTMapping, error) {
	obj := &unstructured.Unstructured{}
	if err := render(*op.TemplatePath, index, op.Count, op.TemplateParams, &obj.Object); err != nil {
		return nil, nil, nil, err
	}
	if op.APIVersion != "" {
		obj.SetAPIVersion(op.APIVersion)
	}
	m, err := r.mapping(obj)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", *op.TemplatePath, err)
	}
	res := r.dynamic.Resource(m.Resource)
	ns := ""
	if op.Namespace != nil {
		ns = *op.Namespace
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	switch {
	case ns != "" && !namespaced:
		return nil, nil, nil, fmt.Errorf("%s: namespace %q set, but %s is cluster-scoped", *op.TemplatePath, ns, m.GroupVersionKind)
	case ns == "" && namespaced:
		return nil, nil, nil, fmt.Errorf("%s: no namespace set, but %s is namespaced", *op.TemplatePath, m.GroupVersionKind)
	}
	if namespaced {
		if err := r.nsCreated(ctx, ns, nil); err != nil {
			return nil, nil, nil, err
		}
		obj.SetNamespace(ns)
		if m.GroupVersionKind.Group == "" && m.GroupVersionKind.Kind == "Pod" {
			// Only the contender of this run schedules the suite's pods.
			if name, _, _ := unstructured.NestedString(obj.Object, "spec", "schedulerName"); name == "" || name == v1.DefaultSchedulerName {
				if err := unstructured.SetNestedField(obj.Object, r.schedulerName, "spec", "schedulerName"); err != nil {
					return nil, nil, nil, err
				}
			}
		}
		return obj, res.Namespace(ns), m, nil
	}
	return obj, res, m, nil
}

// createAny creates count objects from the template, retrying for a while as upstream (a kind just made available
// may not be served at once).
func (r *runner) createAny(ctx context.Context, op Op) error {
	count := op.Count
	if op.CountParam == "" && count == 0 {
		count = 1
	}
	op.Count = count
	for i := 0; i < count; i++ {
		obj, res, m, err := r.anyObject(ctx, op, i)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			created, err := res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err == nil {
				r.made = append(r.made, made{mapping: m, namespace: created.GetNamespace(), name: created.GetName()})
				if m.GroupVersionKind.Group == "" && m.GroupVersionKind.Kind == "Pod" {
					r.createdPods[created.GetNamespace()]++
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: creating %s %s: %w", *op.TemplatePath, m.GroupVersionKind.Kind, obj.GetName(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// updateAny replaces count objects (and their status) with the template's, at updatePerSecond when set, through
// the op's subresources (a pod's `resize`) when named: upstream's updateAny.
func (r *runner) updateAny(ctx context.Context, op Op) error {
	var tick <-chan time.Time
	if op.UpdatePerSecond > 0 {
		t := time.NewTicker(time.Second / time.Duration(op.UpdatePerSecond))
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < op.Count; i++ {
		if tick != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick:
			}
		}
		obj, res, m, err := r.anyObject(ctx, op, i)
		if err != nil {
			return err
		}
		opts := metav1.UpdateOptions{FieldValidation: "Strict"}
		if _, err := res.Update(ctx, obj, opts, op.Subresources...); err != nil {
			return fmt.Errorf("%s: updating %s %s: %w", *op.TemplatePath, m.GroupVersionKind.Kind, obj.GetName(), err)
		}
		if _, err := res.UpdateStatus(ctx, obj, opts); err != nil {
			return fmt.Errorf("%s: updating the status of %s %s: %w", *op.TemplatePath, m.GroupVersionKind.Kind, obj.GetName(), err)
		}
	}
	return nil
}

// deleteObject deletes one object an op made (a namespaced one at once); the error names it, and a NotFound stays
// one (apierrors.IsNotFound sees through the wrapping).
func (r *runner) deleteObject(ctx context.Context, o made) error {
	res := r.dynamic.Resource(o.mapping.Resource)
	zero := int64(0)
	var err error
	if o.namespace != "" {
		err = res.Namespace(o.namespace).Delete(ctx, o.name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	} else {
		err = res.Delete(ctx, o.name, metav1.DeleteOptions{})
	}
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", o.mapping.GroupVersionKind.Kind, o.name, err)
	}
	return nil
}

// deleteMade deletes what createAny made, newest first (claims before the classes they name).
func (r *runner) deleteMade(ctx context.Context) error {
	for i := len(r.made) - 1; i >= 0; i-- {
		o := r.made[i]
		res := r.dynamic.Resource(o.mapping.Resource)
		err := r.deleteObject(ctx, o)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		// An allocated claim keeps its deletion-protection finalizer until a controller this control plane does
		// not run removes it: here.
		if err == nil {
			if o.namespace != "" {
				_, err = res.Namespace(o.namespace).Patch(ctx, o.name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			} else {
				_, err = res.Patch(ctx, o.name, types.MergePatchType, noFinalizers, metav1.PatchOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the finalizers of %s %s: %w", o.mapping.GroupVersionKind.Kind, o.name, err)
			}
		}
	}
	r.made = nil
	return nil
}

// createPodGroups creates count PodGroups from the template in the op's namespace (strict field validation,
// retried for 20 s but for an invalid or forbidden object) and waits up to 10 s until the API server lists them
// all: upstream's runCreatePodGroupsOp, which waits for its scheduler's informer (the contender's cannot be seen
// from here).
func (r *runner) createPodGroups(ctx context.Context, op Op) error {
	ns := *op.Namespace
	if err := r.nsCreated(ctx, ns, nil); err != nil {
		return err
	}
	r.createdPods[ns] += 0
	var m *meta.RESTMapping
	for i := 0; i < op.Count; i++ {
		obj, res, mapping, err := r.anyObject(ctx, op, i)
		if err != nil {
			return err
		}
		m = mapping
		// A PodGroup's spec.priority becomes a PriorityClass of that value, as a pod's (createPods): the Priority
		// admission plugin of this API server refuses a priority without its class.
		if p, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "priority"); found && p != nil {
			if cls, _, _ := unstructured.NestedString(obj.Object, "spec", "priorityClassName"); cls == "" {
				name, err := r.priorityClassOf(ctx, int32(toFloat(p)))
				if err != nil {
					return err
				}
				unstructured.RemoveNestedField(obj.Object, "spec", "priority")
				if err := unstructured.SetNestedField(obj.Object, name, "spec", "priorityClassName"); err != nil {
					return err
				}
			}
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			created, err := res.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
			if err == nil {
				r.made = append(r.made, made{mapping: m, namespace: ns, name: created.GetName()})
				break
			}
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) || time.Now().After(deadline) {
				return fmt.Errorf("%s: creating %s %s: %w", *op.TemplatePath, m.GroupVersionKind.Kind, obj.GetName(), err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	if m == nil {
		return nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		list, err := r.dynamic.Resource(m.Resource).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) >= op.Count {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for PodGroups to be listed: %v", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
