#!/usr/bin/env python3
# Trellis: launches moto_server on 127.0.0.1 with edge fixes for the gaps kops and the
# rollout engine hit (docs/design/aws-emulator.md). Embedded in internal/awsemu, which runs it.
"""moto_server 5.2.1 + fourteen edge fixes for kops/Trellis (test-only). usage: launcher.py -p PORT
1 DescribeWarmPool/DeleteWarmPool, unknown ASG: ValidationError, not IndexError/HTTP 500.
2 ModifySubnetAttribute keeps PrivateDnsHostnameTypeOnLaunch + EnableResourceNameDnsAAAARecordOnLaunch.
3 DescribeAutoScalingGroups Instances[].LaunchTemplate.Version = version the instance was launched
  from (moto: the template's current default), also in tag aws:ec2launchtemplate:version.
4 CreateLaunchTemplateVersion honours SourceVersion and base64-wraps UserData (moto: neither;
  an ASG launching from such a version fails with AssertionError/HTTP 500).
5 ASG launches spread over VPCZoneIdentifier's subnets (moto: all in the first).
6 RegisterImage keeps Architecture, RootDeviceName and VirtualizationType (moto: drops them, so
  kops refuses every instance type: "machine type architecture x86_64 does not match image architecture \"\"").
7 TerminateInstanceInAutoScalingGroup of an instance no group holds: ValidationError, as AWS
  answers (moto: StopIteration/HTTP 500, so a rollout resumed after a kill could not retry a terminate).
8 Create/UpdateAutoScalingGroup keep MaxInstanceLifetime, and DescribeAutoScalingGroups returns it
  (moto: drops it, so kops plans the change again after every apply).
9 Private addresses are unique in their subnet and never AWS's reserved ones (moto: random, so
  CreateNetworkInterface and AssignPrivateIpAddresses hand one address out twice, and netd's pool
  saw an ENI with fewer distinct addresses than EC2 counted).
10 RunInstances from a launch template with instance-store mappings ({DeviceName, VirtualName:
  ephemeralN}, no Ebs: kops's g5, p5, m6id, c6id, i4i groups) launches, with EBS volumes for the
  Ebs mappings only, as AWS does (moto: KeyError 'Ebs'/HTTP 500 on every launch). The template
  keeps the mappings as written.
11 DeleteSubnet removes the subnet's route-table associations, as AWS does (moto: keeps them, so
  the route table answers DependencyViolation forever and `cluster delete` never finishes).
12 DeleteVpc leaves the VPC's DHCP options set, as AWS does (moto deletes it, and kops's deleter,
  which deletes it after the VPC, got InvalidDhcpOptionID.NotFound, a code it does not know, forever).
13 An ASG whose target group was deleted can still be scaled and deleted, as on AWS (moto: every
  capacity change, DeleteAutoScalingGroup among them, answers TargetGroupNotFound forever, so a
  `cluster delete` whose pass deleted the target group first never finished).
14 One request at a time (moto_server answers on many threads over shared dicts: a DeleteSubnet
  racing a DeleteRouteTable failed half-way with "dictionary changed size during iteration",
  leaving the subnet gone and its association kept, so `cluster delete` waited forever).
  TRELLIS_MOTO_SWITCH_INTERVAL (seconds) sets Python's thread switch interval, for tests."""
import collections, copy, ipaddress, os, random, sys, threading
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import ec2_backends
from moto.ec2.models.instances import InstanceBackend
from moto.ec2.models.subnets import SubnetBackend
from moto.ec2.models.vpcs import VPCBackend
from moto.ec2.models import elastic_network_interfaces as enim
from moto.autoscaling import models as asgm
from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.responses import AutoScalingResponse
from moto.core.responses import ActionResult
from moto.ec2.responses.amis import AmisResponse
from moto.ec2.responses.launch_templates import LaunchTemplates
from moto.ec2.responses.subnets import Subnets
from moto.ec2.utils import parse_user_data
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.server import main

B = asgm.AutoScalingBackend                                                   # 1
def _known(orig):
    def f(self, group_name):
        if not self.describe_auto_scaling_groups([group_name]):
            raise ValidationError(f"AutoScalingGroup name not found - {group_name}")
        return orig(self, group_name)
    return f
B.describe_warm_pool, B.delete_warm_pool = _known(B.describe_warm_pool), _known(B.delete_warm_pool)

_terminate = B.terminate_instance                                             # 7
def terminate_instance(self, instance_id, should_decrement):
    if not any(st.instance.id == instance_id for g in self.autoscaling_groups.values() for st in g.instance_states):
        raise ValidationError(f"Instance Id not found - No managed instance found for instance ID: {instance_id}")
    return _terminate(self, instance_id, should_decrement)
B.terminate_instance = terminate_instance

def _lifetime(orig):                                                          # 8
    def f(self):
        out = orig(self)
        if (v := self._get_int_param("MaxInstanceLifetime")) is not None:
            self.autoscaling_backend.autoscaling_groups[self._get_param("AutoScalingGroupName")].max_instance_lifetime = v
        return out
    return f
R = AutoScalingResponse
R.create_auto_scaling_group, R.update_auto_scaling_group = _lifetime(R.create_auto_scaling_group), _lifetime(R.update_auto_scaling_group)

_modify_subnet = Subnets.modify_subnet_attribute                              # 2
def modify_subnet_attribute(self):
    opts = self.ec2_backend.get_subnet(self._get_param("SubnetId")).private_dns_name_options_on_launch
    if t := self._get_param("PrivateDnsHostnameTypeOnLaunch"):
        opts["HostnameType"] = t
    if (v := self._get_param("EnableResourceNameDnsAAAARecordOnLaunch.Value")) is not None:
        opts["EnableResourceNameDnsAAAARecord"] = str(v).lower() == "true"
    return _modify_subnet(self)
Subnets.modify_subnet_attribute = modify_subnet_attribute

G = asgm.FakeAutoScalingGroup                                                 # 3, 5
_replace = G.replace_autoscaling_group_instances
def replace_autoscaling_group_instances(self, count_needed, propagated_tags):
    before = {s.instance.id for s in self.instance_states}
    subnets, orig = (self.vpc_zone_identifier or "").split(","), self.vpc_zone_identifier
    try:
        for _ in range(count_needed if len(subnets) > 1 else 0):
            n = {s: 0 for s in subnets}
            for st in self.instance_states:
                if getattr(st.instance, "subnet_id", None) in n:
                    n[st.instance.subnet_id] += 1
            self.vpc_zone_identifier = min(subnets, key=lambda s: (n[s], subnets.index(s)))
            _replace(self, 1, dict(propagated_tags))
    finally:
        self.vpc_zone_identifier = orig
    if len(subnets) <= 1:
        _replace(self, count_needed, propagated_tags)
    if self.ec2_launch_template is not None:
        v = self.ec2_launch_template.get_version(self.launch_template_version).number
        for s in self.instance_states:
            if s.instance.id not in before:
                s.instance.launched_lt_version = v
                s.instance.add_tag("aws:ec2launchtemplate:version", str(v))
G.replace_autoscaling_group_instances = replace_autoscaling_group_instances
_lt = asgm.InstanceState.launch_template.fget
def _instance_lt(self):
    lt = _lt(self)
    if lt is not None and hasattr(self.instance, "launched_lt_version"):
        lt["Version"] = self.instance.launched_lt_version
    return lt
asgm.InstanceState.launch_template = property(_instance_lt)

def create_launch_template_version(self):                                     # 4
    tid, name = self._get_param("LaunchTemplateId"), self._get_param("LaunchTemplateName")
    t = self.ec2_backend.get_launch_template(tid) if tid else self.ec2_backend.get_launch_template_by_name(name)
    src, new = self._get_param("SourceVersion"), self._get_param("LaunchTemplateData", {})
    data = copy.deepcopy(t.get_version(src).data) if src else {}
    data.update(new)
    if "UserData" in new:
        data["UserData"] = parse_user_data(new["UserData"])
    self.error_on_dryrun()
    v = t.create_version(data, self._get_param("VersionDescription"))
    return ActionResult({"LaunchTemplateVersion": {
        "CreateTime": v.create_time, "CreatedBy": f"arn:{self.partition}:iam::{self.current_account}:root",
        "DefaultVersion": t.is_default(v), "LaunchTemplateData": v.data, "LaunchTemplateId": t.id,
        "LaunchTemplateName": t.name, "VersionDescription": v.description, "VersionNumber": v.number}})
LaunchTemplates.create_launch_template_version = create_launch_template_version

_register = AmisResponse.register_image                                       # 6
def register_image(self):
    result = _register(self)
    ami = self.ec2_backend.amis[result.result["ImageId"]]
    ami.architecture = self._get_param("Architecture") or "x86_64"
    ami.root_device_name = self._get_param("RootDeviceName") or ami.root_device_name
    ami.root_device_type = "ebs"
    ami.virtualization_type = self._get_param("VirtualizationType") or "hvm"
    return result
AmisResponse.register_image = register_image

_recent = collections.deque(maxlen=64)                                         # 9
def random_private_ip(cidr=None, ipv6=False):
    if not cidr or ipv6:
        return _random_ip(cidr, ipv6)
    net = ipaddress.IPv4Network(cidr)
    used = {a["PrivateIpAddress"] for acct in ec2_backends.values() for b in acct.values()
            for e in b.enis.values() if e.subnet is not None and e.subnet.cidr_block == cidr
            for a in e.private_ip_addresses}
    hosts = list(net.hosts())[3:]  # AWS reserves the first four and the last address
    free = [str(h) for h in hosts if str(h) not in used and str(h) not in _recent] or \
           [str(h) for h in hosts if str(h) not in used]
    if not free:
        raise EC2ClientError("InsufficientFreeAddressesInSubnet", f"no free address left in {cidr}")
    ip = random.choice(free)
    _recent.append(ip)  # a batch is built before any of it is recorded
    return ip
_random_ip, enim.random_private_ip = enim.random_private_ip, random_private_ip

_run = InstanceBackend.run_instances                                          # 10
def run_instances(self, image_id, count, user_data, security_group_names, **kwargs):
    lt = kwargs.get("launch_template")
    if not lt or "block_device_mappings" in kwargs:
        return _run(self, image_id, count, user_data, security_group_names, **kwargs)
    m = self._get_template_from_args(lt).data.get("BlockDeviceMappings") or []
    if all("Ebs" in b for b in m):
        return _run(self, image_id, count, user_data, security_group_names, **kwargs)
    # Passed explicitly, moto skips the default root volume it adds on the template path.
    r = _run(self, image_id, count, user_data, security_group_names,
             block_device_mappings=[b for b in m if "Ebs" in b], **kwargs)
    for i in r.instances:
        i.setup_defaults()
    return r
InstanceBackend.run_instances = run_instances

_delete_subnet = SubnetBackend.delete_subnet                                  # 11
def delete_subnet(self, subnet_id):
    s = _delete_subnet(self, subnet_id)
    for rt in self.route_tables.values():
        for a in [a for a, target in rt._associations.items() if target == subnet_id]:
            del rt._associations[a]
    return s
SubnetBackend.delete_subnet = delete_subnet

_delete_vpc = VPCBackend.delete_vpc                                            # 12
def delete_vpc(self, vpc_id):
    vpc = self.vpcs.get(vpc_id)
    d = vpc.dhcp_options if vpc is not None else None
    r = _delete_vpc(self, vpc_id)
    if d is not None and d.id not in self.dhcp_options_sets:
        self.dhcp_options_sets[d.id] = d
    return r
VPCBackend.delete_vpc = delete_vpc

_update_tgs = B.update_attached_target_groups                                   # 13
def update_attached_target_groups(self, group_name):
    group = self.autoscaling_groups[group_name]
    arns = group.target_group_arns
    group.target_group_arns = [a for a in arns if a in self.elbv2_backend.target_groups]
    try:
        return _update_tgs(self, group_name)
    finally:
        group.target_group_arns = arns
B.update_attached_target_groups = update_attached_target_groups

_serial = threading.Lock()                                                      # 14
_dispatch = DomainDispatcherApplication.__call__
def dispatch(self, environ, start_response):
    with _serial:
        return _dispatch(self, environ, start_response)
DomainDispatcherApplication.__call__ = dispatch

if __name__ == "__main__":
    if os.environ.get("TRELLIS_MOTO_SWITCH_INTERVAL"):  # tests: make request races show
        sys.setswitchinterval(float(os.environ["TRELLIS_MOTO_SWITCH_INTERVAL"]))
    if {"-H", "--host"} & set(sys.argv[1:]):
        sys.exit("moto_launcher: binds 127.0.0.1 only")
    sys.exit(main(["-H", "127.0.0.1"] + sys.argv[1:]))
