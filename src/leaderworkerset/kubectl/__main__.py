from leaderworkerset.kubectl.cli import main

main()
