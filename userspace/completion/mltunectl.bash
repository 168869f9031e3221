# bash completion for mltunectl                              -*- shell-script -*-

_mltunectl_profiles() {
	local dir=/etc/mltune/profiles i
	for ((i = 1; i < COMP_CWORD; i++)); do
		[[ ${COMP_WORDS[i]} == --sysroot ]] && dir=${COMP_WORDS[i + 1]}/etc/mltune/profiles
	done
	local names="base training inference"
	[[ -d $dir ]] && names+=" $(cd "$dir" && ls -- *.toml 2>/dev/null | sed 's/\.toml$//')"
	echo "$names"
}

_mltunectl() {
	local cur prev words cword
	_init_completion || return

	local globals="--sysroot --json --dry-run -v --verbose --help --version"
	local commands="profile audit verify diff switch off active status recommend metrics conformance follow serve prove persist nic topology plan exec boot sched watch pool feeder noise drift config"
	local cmd="" sub="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--sysroot) ((i++)) ;;
		-*) ;;
		*) if [[ -z $cmd ]]; then cmd=${words[i]}; elif [[ -z $sub ]]; then sub=${words[i]}; fi ;;
		esac
	done

	case $prev in
	--sysroot) _filedir -d; return ;;
	--backend | -b) COMPREPLY=($(compgen -W "auto kernel direct" -- "$cur")); return ;;
	--profile | -p) COMPREPLY=($(compgen -W "$(_mltunectl_profiles)" -- "$cur")); return ;;
	--probe) COMPREPLY=($(compgen -W "auto bpf proc" -- "$cur")); return ;;
	--path) _filedir; return ;;
	--output | -o) _filedir prom; return ;;
	--mempolicy) COMPREPLY=($(compgen -W "bind preferred none" -- "$cur")); return ;;
	--nvml) COMPREPLY=($(compgen -W "none" -- "$cur")); _filedir so; return ;;
	esac

	if [[ $cur == -* ]]; then
		local opts=$globals
		case $cmd in
		switch) opts+=" --backend --gate --gate-cpus" ;;
		prove) opts+=" --cpus --feeder --mechanism --partition --neighbour --rounds --seconds --probe --backend --gpu --keep" ;;
		audit) opts+=" --profile --nvml --no-nvidia-smi --noise --noise-budget" ;;
		exec) opts+=" --gpu --rank --mempolicy --gpus-per-rank --feeder-cores-per-gpu" ;;
		noise) opts+=" --cpus --duration --probe --own-cgroup --top" ;;
		drift) [[ $sub == show ]] && opts+=" --path --tid" ;;
		feeder) [[ $sub == status ]] && opts+=" --noise --budget" ;;
		persist) opts+=" --profile --remove" ;;
		sched) [[ $sub == reset ]] && opts+=" --pid" || opts+=" --profile --pid --feeder"; [[ $sub == watch ]] && opts+=" --duration --rt-priority" ;;
		watch) opts+=" --profile --pid --feeder --duration --rt-priority" ;;
		nic) [[ $sub == show ]] && opts+=" --feeder" || opts+=" --profile --set --feeder --skip-unsupported" ;;
		plan) opts+=" --gpus-per-rank --feeder-cores-per-gpu" ;;
		metrics) opts+=" --output" ;;
		follow) opts+=" --listen" ;;
		serve) opts+=" --socket" ;;
		boot) [[ $sub == remove ]] || opts+=" --profile --isolate --gpus-per-rank --feeder-cores-per-gpu" ;;
		esac
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi

	case $cmd in
	"") COMPREPLY=($(compgen -W "$commands" -- "$cur")) ;;
	profile)
		case $sub in
		"") COMPREPLY=($(compgen -W "list show check" -- "$cur")) ;;
		show) COMPREPLY=($(compgen -W "$(_mltunectl_profiles)" -- "$cur")); _filedir toml ;;
		check) _filedir toml ;;
		esac
		;;
	verify | diff | prove) COMPREPLY=($(compgen -W "$(_mltunectl_profiles)" -- "$cur")); _filedir toml ;;
	switch) COMPREPLY=($(compgen -W "$(_mltunectl_profiles) baseline" -- "$cur")); _filedir toml ;;
	sched) [[ -z $sub ]] && COMPREPLY=($(compgen -W "list apply watch reset" -- "$cur")) ;;
	nic)
		case $sub in
		"") COMPREPLY=($(compgen -W "show diff apply" -- "$cur")) ;;
		*) COMPREPLY=($(compgen -W "$(ls /sys/class/net 2>/dev/null)" -- "$cur")) ;;
		esac
		;;
	boot) [[ -z $sub ]] && COMPREPLY=($(compgen -W "show apply verify remove" -- "$cur")) ;;
	pool) [[ -z $sub ]] && COMPREPLY=($(compgen -W "status reserve release" -- "$cur")) ;;
	drift) [[ -z $sub ]] && COMPREPLY=($(compgen -W "start stop status show" -- "$cur")) ;;
	feeder)
		case $sub in
		"") COMPREPLY=($(compgen -W "status on off run" -- "$cur")) ;;
		on) COMPREPLY=($(compgen -W "--cpus --mechanism" -- "$cur")) ;;
		esac
		;;
	esac
} && complete -F _mltunectl mltunectl
