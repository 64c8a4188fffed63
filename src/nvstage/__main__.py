from nvstage.cli.app import main

main()
