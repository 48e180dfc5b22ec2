// Package cniplugin is the trellis-cni plugin of netd's AWS mode: it asks
// netd (over its Unix socket) for a VPC address for the pod, then wires the
// pod with podnet. A pod that cannot be wired gives its address back.
package cniplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/trellis-dev/trellis/daemons/netd/podnet"
	"github.com/trellis-dev/trellis/internal/netdapi"
)

// NetConf is the plugin's entry in the conflist netd writes.
type NetConf struct {
	types.NetConf
	// Socket is netd's (default netdapi.DefaultSocket).
	Socket string `json:"socket,omitempty"`
}

func parse(b []byte) (*NetConf, error) {
	c := &NetConf{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("trellis-cni configuration: %w", err)
	}
	if c.Socket == "" {
		c.Socket = netdapi.DefaultSocket
	}
	return c, nil
}

// request builds netd's request from the runtime's arguments.
func request(args *skel.CmdArgs) netdapi.Request {
	r := netdapi.Request{Container: args.ContainerID, Iface: args.IfName, Netns: args.Netns}
	for kv := range strings.SplitSeq(args.Args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			r.Namespace = v
		case "K8S_POD_NAME":
			r.Pod = v
		}
	}
	return r
}

// Add assigns and wires; its result goes to stdout.
func Add(args *skel.CmdArgs) error {
	conf, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	req := request(args)
	var addr netdapi.Address
	if err := call(conf.Socket, netdapi.AddPath, req, &addr); err != nil {
		return err
	}
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("open a netlink handle in the host namespace: %w", err)
	}
	defer host.Close()
	p := podnet.Pod{Netns: args.Netns, Iface: args.IfName, HostVeth: podnet.HostVeth(args.ContainerID, args.IfName), IP: addr.IP, Table: addr.Table, MTU: addr.MTU}
	if err := podnet.Setup(host, p); err != nil {
		// Give the address back rather than leave it to the collector.
		_ = podnet.Teardown(host, p)
		if derr := call(conf.Socket, netdapi.DelPath, req, &netdapi.Address{}); derr != nil {
			err = errors.Join(err, fmt.Errorf("and releasing %s failed: %w", addr.IP, derr))
		}
		return err
	}
	res := &types100.Result{
		CNIVersion: conf.CNIVersion,
		Interfaces: []*types100.Interface{{Name: p.HostVeth}, {Name: args.IfName, Sandbox: args.Netns}},
		IPs: []*types100.IPConfig{{Interface: types100.Int(1), Address: net.IPNet{IP: addr.IP.AsSlice(), Mask: net.CIDRMask(32, 32)},
			Gateway: net.ParseIP(podnet.Gateway)}},
		Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, GW: net.ParseIP(podnet.Gateway)}},
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// Del releases and unwires; repeated calls are fine.
func Del(args *skel.CmdArgs) error {
	conf, err := parse(args.StdinData)
	if err != nil {
		return err
	}
	var addr netdapi.Address
	if err := call(conf.Socket, netdapi.DelPath, request(args), &addr); err != nil {
		return err
	}
	host, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("open a netlink handle in the host namespace: %w", err)
	}
	defer host.Close()
	return podnet.Teardown(host, podnet.Pod{HostVeth: podnet.HostVeth(args.ContainerID, args.IfName), IP: addr.IP, Table: addr.Table})
}

// Check verifies the host side is there.
func Check(args *skel.CmdArgs) error {
	if _, err := netlink.LinkByName(podnet.HostVeth(args.ContainerID, args.IfName)); err != nil {
		return fmt.Errorf("pod interface of %s: %w", args.ContainerID, err)
	}
	return nil
}

// call POSTs to netd on its socket. ADD may wait on EC2 when the node's
// pool is empty.
func call(socket, path string, req netdapi.Request, out *netdapi.Address) error {
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}}}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode the request to %s: %w", path, err)
	}
	resp, err := c.Post("http://netd"+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("netd at %s: %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e netdapi.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("netd: %s: %s", resp.Status, e.Message)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
