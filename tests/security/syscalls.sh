# tests/security/syscalls.sh — tests/security/syscalls.py run in a session
# and its answers checked, sourced by tests/security/isolation.sh (bwrap,
# row 33) and tests/docker.sh (a container): the same answers in both
# sandboxes.
# shellcheck shell=bash disable=SC2016 # eval strings expand later, on purpose

# syscall_probe SESSION PREFIX: run the probe in SESSION (kept as "sys"),
# and every check of its output, each named PREFIX_...; skipped where
# the probe knows no system call numbers.
syscall_probe() {
	local skipping_before=$SKIPPING
	ARCH=$(uname -m)
	case $ARCH in
	x86_64 | aarch64) ;;
	*) [ -n "$SKIPPING" ] || SKIPPING="the probe knows the system call numbers of x86_64 and aarch64 only" ;;
	esac
	DIAG=sys
	pyx "$1" <"$top_srcdir/tests/security/syscalls.py"
	keep sys
	syscall_checks "$2"
	DIAG=
	SKIPPING=$skipping_before
}

# syscall_checks PREFIX: every check of the probe's output (kept as sys).
syscall_checks() {
	P=$1
	# refused NAME: the call NAME failed with EPERM (or the architecture has no
	# such call: the x86_64-only ones on aarch64)
	refused() {
		v=$(val sys "$1")
		[ "$v" = absent ] && [ "$ARCH" != x86_64 ] && return 0
		eq "$v" EPERM
	}
	# refused_raw NAME: what a refused raw system call NAME answers here
	refused_raw() { if [ "$ARCH" = aarch64 ] && [ "$1" = mknod ]; then echo absent; else echo EPERM; fi; }
	for call in mbind set_mempolicy get_mempolicy migrate_pages move_pages set_mempolicy_home_node \
		memfd_secret modify_ldt fanotify_init fanotify_mark pidfd_getfd process_madvise \
		lsm_get_self_attr lsm_set_self_attr lsm_list_modules open_tree_attr file_getattr \
		file_setattr listns getpmsg putpmsg afs_syscall tuxcall security vserver; do
		check "${P}_${call}_is_EPERM" eval "rc_is sys 0 && refused $call"
	done
	# the kernel refuses these too (no CAP_SYS_ADMIN): EPERM with or without the filter
	check "${P}_sethostname_and_setdomainname_are_EPERM" eval '
		rc_is sys 0 && refused sethostname && refused setdomainname'
	check "${P}_personality_query_PER_LINUX_PER_LINUX32_and_UNAME26_work" eval '
		rc_is sys 0 && eq "$(val sys personality_query)" ok && eq "$(val sys personality_PER_LINUX)" ok &&
		eq "$(val sys personality_PER_LINUX32)" ok && eq "$(val sys personality_UNAME26)" ok &&
		eq "$(val sys personality_UNAME26_PER_LINUX32)" ok && eq "$(val sys personality_after)" 0x0'
	check "${P}_personality_ADDR_NO_RANDOMIZE_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys personality_ADDR_NO_RANDOMIZE)" EPERM'
	check "${P}_personality_READ_IMPLIES_EXEC_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys personality_READ_IMPLIES_EXEC)" EPERM'
	check "${P}_personality_of_another_os_or_flag_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys personality_PER_SVR4)" EPERM && eq "$(val sys personality_UNAME26_1)" EPERM'
	check "${P}_personality_with_bit_31_but_not_the_query_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys personality_0xfffffffe)" EPERM &&
		eq "$(val sys personality_0x80000000)" EPERM'
	check "${P}_personality_above_32_bits_is_EPERM_as_in_docker" eval '
		rc_is sys 0 && eq "$(val sys personality_1_32)" EPERM &&
		eq "$(val sys personality_minus_1_in_64_bits)" EPERM'
	check "${P}_socket_AF_VSOCK_is_EPERM" eval 'rc_is sys 0 && eq "$(val sys socket_AF_VSOCK)" EPERM'
	check "${P}_socket_AF_VSOCK_with_bit_32_set_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys socket_AF_VSOCK_1_32)" EPERM'
	check "${P}_socket_AF_ALG_is_EPERM" eval 'rc_is sys 0 && eq "$(val sys socket_AF_ALG)" EPERM'
	check "${P}_netlink_route_sockets_work" eval '
		rc_is sys 0 && eq "$(val sys netlink_ROUTE)" ok && eq "$(val sys netlink_ROUTE_dgram)" ok'
	for fam in SOCK_DIAG XFRM AUDIT NETFILTER KOBJECT_UEVENT GENERIC; do
		check "${P}_netlink_${fam}_is_EPERM" eval "rc_is sys 0 && eq \"\$(val sys netlink_$fam)\" EPERM"
	done
	check "${P}_netlink_with_bit_32_set_in_family_or_protocol_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys netlink_GENERIC_family_1_32)" EPERM &&
		eq "$(val sys netlink_GENERIC_proto_1_32)" EPERM'
	check "${P}_unix_inet_and_inet6_sockets_work" eval 'rc_is sys 0 && eq "$(val sys socket_others)" "ok ok ok"'
	check "${P}_renameat2_RENAME_WHITEOUT_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys renameat2_WHITEOUT)" "EPERM EPERM"'
	check "${P}_renameat2_without_RENAME_WHITEOUT_works" eval '
		rc_is sys 0 && eq "$(val sys renameat2_others)" "ok ok ok"'
	check "${P}_mknod_of_a_whiteout_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys mknod_whiteout)" "EPERM $(refused_raw mknod) EPERM"'
	check "${P}_mkfifo_and_a_regular_mknod_work_and_no_whiteout_was_made" eval '
		rc_is sys 0 && eq "$(val sys mknod_others)" "ok ok" && eq "$(val sys files)" "a b3 c fifo reg"'
	check "${P}_kbox_refuses_io_uring_userfaultfd_ptrace_kcmp_process_vm_readv_and_keyctl" eval '
		rc_is sys 0 && eq "$(val sys io_uring_setup) $(val sys userfaultfd) $(val sys ptrace)" \
			"EPERM EPERM EPERM" &&
		eq "$(val sys kcmp) $(val sys process_vm_readv) $(val sys keyctl)" "EPERM EPERM EPERM"'
	check "${P}_clone_into_a_new_user_namespace_is_EPERM" eval '
		rc_is sys 0 && eq "$(val sys clone_NEWUSER)" EPERM'
	check "${P}_clone3_and_openat2_are_not_implemented" eval '
		rc_is sys 0 && eq "$(val sys clone3) $(val sys openat2)" "ENOSYS ENOSYS"'
	check "${P}_no_setuid_or_setgid_mode_can_be_set" eval '
		rc_is sys 0 && eq "$(val sys chmod_setid)" "EPERM EPERM ok" &&
		eq "$(val sys fchmodat2_setuid)" ENOSYS && eq "$(val sys setid_mode)" 0o755'
}
