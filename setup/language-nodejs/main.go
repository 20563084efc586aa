// Command pulumi-language-nodejs is the Node.js language host used where no Pulumi CLI is
// installed and the host must be built from Go modules.
//
// Why it exists: the upstream host of the CLI's release lives in its own Go module
// (sdk/nodejs/cmd/pulumi-language-nodejs/v3), which has no tags and whose pseudo-versions the
// module proxy reachable here refuses. The newest upstream host that the proxy does serve is
// the one inside github.com/pulumi/pulumi/sdk/v3 up to v3.68.0 (built as
// pulumi-language-nodejs-upstream). It runs programs fine, but its RunPlugin answers "not
// supported", and CLIs since then start Node policy packs through RunPlugin. So this binary
// starts the upstream host, forwards every call to it, and serves RunPlugin itself with the
// same steps as the upstream host of the pinned release: run @pulumi/pulumi's
// run-policy-pack (or run-plugin) with node, behind the SDK's PolicyProxy so the pack sees
// the stack's configuration.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"

	sdk "github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/cmdutil"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

const upstreamName = "pulumi-language-nodejs-upstream"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	upstream pulumirpc.LanguageRuntimeClient
}

func (h *host) GetRequiredPlugins(
	ctx context.Context, req *pulumirpc.GetRequiredPluginsRequest,
) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return h.upstream.GetRequiredPlugins(ctx, req)
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	return h.upstream.Run(ctx, req)
}

func (h *host) GetPluginInfo(ctx context.Context, req *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return h.upstream.GetPluginInfo(ctx, req)
}

func (h *host) About(ctx context.Context, req *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	return h.upstream.About(ctx, req)
}

func (h *host) GetProgramDependencies(
	ctx context.Context, req *pulumirpc.GetProgramDependenciesRequest,
) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return h.upstream.GetProgramDependencies(ctx, req)
}

func (h *host) InstallDependencies(
	req *pulumirpc.InstallDependenciesRequest, server pulumirpc.LanguageRuntime_InstallDependenciesServer,
) error {
	stream, err := h.upstream.InstallDependencies(server.Context(), req)
	if err != nil {
		return err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := server.Send(msg); err != nil {
			return err
		}
	}
}

// RunPlugin starts a Node plugin: a policy pack (kind analyzer) or any other plugin program.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	ctx := server.Context()
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()

	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("node is not on PATH: install Node.js 20.19 or newer: %w", err)
	}
	dir := req.GetInfo().GetProgramDirectory()
	isPolicyPack := req.Kind == string(apitype.AnalyzerPlugin)
	module := "@pulumi/pulumi/cmd/run-plugin"
	if isPolicyPack {
		module = "@pulumi/pulumi/cmd/run-policy-pack"
	}
	entry, err := resolveModule(node, dir, module)
	if err != nil {
		return err
	}

	args := []string{entry}
	// Policy packs take the program directory last; other plugins take it first.
	if isPolicyPack {
		args = append(append(args, req.Args...), dir)
	} else {
		args = append(append(args, dir), req.Args...)
	}
	env := append([]string{}, req.Env...)

	var proxy *sdk.PolicyProxy
	if isPolicyPack {
		proxy, stdout, err = sdk.NewPolicyProxy(ctx, stdout)
		if err != nil {
			return fmt.Errorf("could not start policy pack proxy: %w", err)
		}
		config, err := proxy.AwaitConfiguration(ctx)
		if err != nil {
			return fmt.Errorf("could not get stack configuration: %w", err)
		}
		if config != nil {
			add := func(k, v string) {
				if v != "" {
					env = append(env, k+"="+v)
				}
			}
			add("PULUMI_NODEJS_ORGANIZATION", config.Organization)
			add("PULUMI_NODEJS_PROJECT", config.Project)
			add("PULUMI_NODEJS_STACK", config.Stack)
			add("PULUMI_NODEJS_DRY_RUN", strconv.FormatBool(config.DryRun))
			if config.Config != nil {
				b, err := json.Marshal(config.Config)
				if err != nil {
					return fmt.Errorf("could not marshal stack configuration: %w", err)
				}
				add("PULUMI_CONFIG", string(b))
			}
		}
	}

	cmd := exec.CommandContext(ctx, node, args...)
	// Node policy packs have always run in their own directory, so their node_modules is used.
	cmd.Dir = req.Pwd
	if isPolicyPack {
		cmd.Dir = dir
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("could not start node for plugin %q: %w", req.Name, err)
	}
	if proxy != nil {
		if err := proxy.Attach(ctx, cmd); err != nil {
			return fmt.Errorf("could not attach policy pack proxy: %w", err)
		}
	} else if err := cmd.Wait(); err != nil {
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			if status, ok := exitErr.Sys().(syscall.WaitStatus); ok {
				return fmt.Errorf("Program exited with non-zero exit code: %d", status.ExitStatus())
			}
		}
		return err
	}
	return closer.Close()
}

// resolveModule finds a module the way node would from dir, so the plugin's own
// node_modules wins over any other copy.
func resolveModule(node, dir, module string) (string, error) {
	out, err := exec.Command(node, "-e", "process.stdout.write(require.resolve(process.argv[1], {paths: [process.argv[2]]}))",
		module, dir).Output()
	if err != nil {
		return "", fmt.Errorf("cannot find %s from %s: run npm install there: %w", module, dir, err)
	}
	return string(out), nil
}

// startUpstream runs the upstream host with our arguments and returns a client connected to the
// port it prints.
func startUpstream(args []string) (pulumirpc.LanguageRuntimeClient, *exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	bin := filepath.Join(filepath.Dir(self), upstreamName)
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("could not start %s (run npm run setup): %w", bin, err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return nil, nil, fmt.Errorf("%s printed no port: %w", bin, err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, nil, fmt.Errorf("%s printed %q, not a port", bin, line)
	}
	conn, err := grpc.NewClient("127.0.0.1:"+strconv.Itoa(port),
		grpc.WithTransportCredentials(insecure.NewCredentials()), rpcutil.GrpcChannelOptions())
	if err != nil {
		return nil, nil, err
	}
	return pulumirpc.NewLanguageRuntimeClient(conn), cmd, nil
}

func main() {
	args := os.Args[1:]
	upstream, child, err := startUpstream(args)
	if err != nil {
		cmdutil.Exit(err)
	}
	defer func() { _ = child.Process.Kill() }()

	cancel := make(chan bool)
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: cancel,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, &host{upstream: upstream})
			return nil
		},
	})
	if err != nil {
		cmdutil.Exit(fmt.Errorf("could not start language host RPC server: %w", err))
	}
	// The engine reads our port from the first line of stdout.
	fmt.Printf("%d\n", handle.Port)

	go func() {
		// The upstream host watches the engine and exits when it goes; follow it.
		_ = child.Wait()
		close(cancel)
	}()
	if err := <-handle.Done; err != nil {
		cmdutil.Exit(fmt.Errorf("language host RPC stopped serving: %w", err))
	}
}
