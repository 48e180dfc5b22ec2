package serverset

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// PrintOptions say which serverset to print and how.
type PrintOptions struct {
	// Servers is the comma-separated ZooKeeper ensemble.
	Servers string
	// Root is the znode under which serversets live.
	Root string
	// Service and Env name the serverset: Root/Service/Env.
	Service, Env string
	// Watch prints the members again on every change, until ctx ends.
	Watch bool
	// Out, if set, keeps the members in this file (FileWriter: written
	// atomically, with its shrink guard).
	Out string
}

// Print writes a serverset's members to out as one JSON line, and with
// opts.Watch again on every change. A refused file write is also told on
// errw.
func Print(ctx context.Context, opts PrintOptions, out, errw io.Writer) error {
	conn, _, err := zk.Connect(strings.Split(opts.Servers, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		return fmt.Errorf("connect to ZooKeeper %s: %w", opts.Servers, err)
	}
	defer conn.Close()
	dir := path.Join(opts.Root, opts.Service, opts.Env)
	var file *FileWriter
	if opts.Out != "" {
		file = &FileWriter{Path: opts.Out}
	}
	show := func(ms []Member) error {
		if file != nil {
			if err := file.Write(ms); err != nil {
				fmt.Fprintf(errw, "%v\n", err)
				return err
			}
		}
		b, err := json.Marshal(ms)
		if err != nil {
			return fmt.Errorf("encode the members: %w", err)
		}
		fmt.Fprintln(out, string(b))
		return nil
	}
	if !opts.Watch {
		ms, err := Read(conn, dir)
		if err != nil {
			return err
		}
		return show(ms)
	}
	return Watch(ctx, conn, dir, show)
}
