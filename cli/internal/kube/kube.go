// Package kube loads the cluster connection commands take from --kubeconfig.
package kube

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config loads path (empty: the default rules, $KUBECONFIG or
// ~/.kube/config) and names the client userAgent, so its requests can be
// told apart in the apiserver's metrics and audit log.
func Config(path, userAgent string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// Client is Config's clientset.
func Client(path, userAgent string) (kubernetes.Interface, error) {
	cfg, err := Config(path, userAgent)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
