// Package nodeprovider makes the instances of an AWS API emulator real
// Kubernetes nodes, as Cluster API's Docker provider does for its own tests:
// every running instance of a cluster's node instance groups becomes a kind
// node container of the local cluster, booted from the node image the
// instance's AMI names (the AMI's trellis.dev/node-image tag), joined with
// kubeadm under the instance id, with providerID aws:///<zone>/<instance-id>
// and its group's labels and taints (from the instance's cluster-autoscaler
// node-template tags, which kops sets). A terminated instance's container
// is removed and its Node deleted, as a cloud controller would. The control
// plane stays the kind control-plane node.
package nodeprovider
