#!/usr/bin/python3 -Es
# Runs Debian's tuned once, without the daemon, with every file it touches
# redirected to a scratch directory (so the host's /etc/tuned is left alone):
#   tuned_oneshot.py SCRATCH PROFILE
import sys

import tuned.consts as consts  # patch before any other tuned module binds defaults

scratch, profile = sys.argv[1], sys.argv[2]
consts.GLOBAL_CONFIG_FILE = scratch + "/tuned-main.conf"
consts.LOAD_DIRECTORIES = ["/usr/lib/tuned", scratch + "/profiles"]
consts.ACTIVE_PROFILE_FILE = scratch + "/active_profile"
consts.PROFILE_MODE_FILE = scratch + "/profile_mode"
consts.POST_LOADED_PROFILE_FILE = scratch + "/post_loaded_profile"
consts.PERSISTENT_STORAGE_DIR = scratch + "/storage"
consts.MODULES_FILE = scratch + "/modprobe-tuned.conf"  # the modules plugin's modprobe.d file
sys.argv = ["tuned", "--profile", profile, "--no-dbus", "--no-socket", "--pid", scratch + "/tuned.pid"]
with open("/usr/sbin/tuned", encoding="utf-8") as f:
    exec(compile(f.read(), "/usr/sbin/tuned", "exec"))  # pylint: disable=exec-used
