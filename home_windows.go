//go:build windows

package hindsight

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/windows"
)

// defaultHome is %LOCALAPPDATA%\Hindsight (not roamed: Badger databases and
// a socket belong to one machine), else ~\.hindsight. %LOCALAPPDATA% is
// the user's folder as Windows sets it for every process, like $HOME (read
// by os.UserHomeDir), so it is read here rather than passed down.
func defaultHome() Home {
	if d := os.Getenv("LOCALAPPDATA"); d != "" {
		return Home(filepath.Join(d, "Hindsight"))
	}
	if d, err := os.UserHomeDir(); err == nil {
		return Home(filepath.Join(d, ".hindsight"))
	}
	return Home(".hindsight")
}

// privateDir refuses a home (top) that another user owns (ErrNotYours)
// and restricts it with restrictDir; the directories inside it inherit
// its ACL.
func privateDir(dir string, top bool) error {
	if !top {
		return nil
	}
	if err := checkOwner(dir); err != nil {
		return err
	}
	return restrictDir(dir)
}

// checkOwner returns ErrNotYours when dir's owner is neither the current
// user nor Administrators or SYSTEM (the owners of what an elevated process
// creates; they can read any file whatever its ACL, so they gain nothing).
func checkOwner(dir string) error {
	sd, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("check home: owner of %s: %w", dir, err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("check home: owner of %s: %w", dir, err)
	}
	if owner == nil {
		return fmt.Errorf("check home: %s has no owner", dir)
	}
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("check home: current user: %w", err)
	}
	if owner.Equals(tu.User.Sid) || owner.IsWellKnown(windows.WinBuiltinAdministratorsSid) || owner.IsWellKnown(windows.WinLocalSystemSid) {
		return nil
	}
	return fmt.Errorf("check home: %s is %w (%s; you are %s), who could read or change its traces and logs: "+
		"use a directory of yours (--home or HINDSIGHT_HOME), or take ownership of this one",
		dir, ErrNotYours, owner.String(), tu.User.Sid.String())
}

// restrictDir gives dir a protected ACL (no inherited entries) that lets
// only the current user, SYSTEM and Administrators in, inherited by what is
// created inside it: Windows ignores file modes, and the daemon's socket is
// as private as its directory.
//
// A directory whose ACL is protected already (this one's, set by an earlier
// call, or one its owner chose) is left alone: setting an ACL walks the
// whole tree below it, which every sidecar start would pay for.
func restrictDir(dir string) error {
	if cur, err := windows.GetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION); err == nil {
		if ctl, _, err := cur.Control(); err == nil && ctl&windows.SE_DACL_PROTECTED != 0 {
			return nil
		}
	}
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return fmt.Errorf("restrict %s: current user: %w", dir, err)
	}
	sddl := "D:P(A;OICI;FA;;;" + tu.User.Sid.String() + ")(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"
	sd, err := windows.SecurityDescriptorFromString(sddl)
	if err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	err = windows.SetNamedSecurityInfo(dir, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION, nil, nil, dacl, nil)
	if err != nil {
		return fmt.Errorf("restrict %s: %w", dir, err)
	}
	return nil
}
